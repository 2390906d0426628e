"""Robot-side runtime: artifact format, inference runtimes, safety filter. Imports only numpy (and onnxruntime)."""
