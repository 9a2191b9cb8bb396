"""The lesson runner (``runner``) and the exercise checkers the notebooks import (``exNN``)."""
