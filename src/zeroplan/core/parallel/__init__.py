"""How ranks are arranged: the data × tensor × pipeline grid and which groups stay inside a node (grid), and the
rules a model and a layout must satisfy, for every command (rules)."""
