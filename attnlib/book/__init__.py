"""The book's presentation helpers: figure and table style, the explorer of chapter 9, the book's data files.

Modules: :mod:`~attnlib.book.style` (house style), :mod:`~attnlib.book.explorer` (the live widget),
:mod:`~attnlib.book.explorer_grid` (the grid behind the static explorer), :mod:`~attnlib.book.phase_table`
(thresholds and branch ends from the phase table), :mod:`~attnlib.book.static_explorer` (the static page),
:mod:`~attnlib.book.book_data` (where the data files are).

The top layer: nothing in the library imports from it except ``attnlib/__init__.py``.
"""
