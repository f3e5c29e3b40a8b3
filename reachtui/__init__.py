"""reachtui: does a model *realize* the right answer by default, or only *reach* it under a probe?"""

__version__ = "0.1.0"
