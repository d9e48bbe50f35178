"""The command-line front end (typer): parses, calls the packages, prints.  Nothing else."""
