"""The eval tasks with their data: task files, the data set and the prompts built from them."""
