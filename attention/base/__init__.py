"""The shared base, torch and the standard library only: the case, the record every run makes, the explain engine,
numbers, message catalogues, devices, files and presets."""
