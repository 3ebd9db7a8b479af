"""The eval's context: the output budget and the window, from the inputs and what the engines
serve."""
