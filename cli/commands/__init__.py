"""One module per subcommand: `add(sub)` declares its flags and sets `fn` to its handler."""
