# client unit tests (being written)
