# symbolizer unit tests and ELF fixtures (being written)
