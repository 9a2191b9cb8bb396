"""The lesson runner (``runner``), a learner's progress (``progress``), the syllabus and its slides
(``syllabus``, ``slides``) and the exercise checkers the notebooks import (``exNN``)."""
