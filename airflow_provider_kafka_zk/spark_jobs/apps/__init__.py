"""``spark-submit`` entry points, shipped in the wheel and found with :func:`..package.application_path`."""
