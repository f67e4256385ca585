"""`zeroplan check`: lint DeepSpeed configs, zeroplan plan files and accelerate configs.

Rules carry stable ids (zeroplan.deepspeed.findings.RULES); config-only rules need nothing but the file,
memory and bucket rules also need the model and hardware (flags or a plan file). Entry point:
zeroplan.check.runner.check_file. Kept import-free so zeroplan.export can use the pieces without a cycle.
"""
