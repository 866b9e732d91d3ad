"""The load stage: prompts, request plans run closed, open or dependent, over local workers or Ray."""
