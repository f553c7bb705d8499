"""cmx: reproducible ML benchmarking from declarative recipes."""

__version__ = "0.2.0"

# the name cmx is installed by from the package index (`cmx` there is another project); the import package and
# the command are `cmx`
DISTRIBUTION = "cmx-bench"
