"""The presentation layer: what a person looks at. plots, the notebook explorer, the command line (cli),
the local web page (app) and the endpoint benchmark (bench). Imports any layer; nothing imports it except
the package root. See docs/architecture.md.
"""
