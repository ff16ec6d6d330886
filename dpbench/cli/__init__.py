"""The command-line interface: thin verbs that parse, call the layers below and print."""
