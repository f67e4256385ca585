"""Resolve a command's inputs into a request and evaluate it: the one pipeline every command calls from below
(estimate, check, export, trace). Above core/ and inputs/, below every command package."""
