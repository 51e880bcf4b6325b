"""The budgets that keep a mistaken or hostile spec from hanging dlbs or eating the host.

Every number of docs/security.md lives here, and only here: the loader, the evaluator, the
resolver and the planner read them. Each is far above what a real benchmark spec needs.
"""

from __future__ import annotations

# -- spec files (docs/language.md section 1) -----------------------------------------------
#: Bytes of one spec file or include; a larger one is refused before it is parsed.
MAX_SPEC_BYTES = 2**20
#: Bytes of all the files one spec reads (defaults, includes, the spec): the pure-Python
#: YAML 1.2 parser reads about 100 kB a second, so this bounds loading to seconds.
MAX_SPEC_TOTAL_BYTES = 2 * 2**20
#: Files one spec may read, its includes (and theirs) counted each time they are included.
MAX_SPEC_FILES = 256
#: Brackets or indentation levels inside one document (and inside one value).
MAX_NESTING = 64
#: Values (scalars, lists and objects) of one document once YAML aliases are expanded.
MAX_DOCUMENT_VALUES = 1_000_000

# -- names (docs/language.md section 2) ----------------------------------------------------
#: Characters of one parameter name.
MAX_NAME_LENGTH = 200

# -- expressions and regular expressions (sections 5 and 7) --------------------------------
#: Seconds one `$( ... )$` may take (CPU time of the thread that evaluates it: a thread kept
#: waiting on a loaded machine is not over it), and one regular expression match or search.
EXPRESSION_SECONDS = 1.0
#: Bytes the values one expression creates may add up to (each counted when it is made).
EXPRESSION_BYTES = 64 * 2**20
#: Characters of one string an expression makes, and of the expression's own text.
MAX_STRING = 100_000
#: Items of one list, dict, set or range an expression makes.
MAX_ITEMS = 100_000
#: Bits of one integer an expression makes (2**8192 has 2,467 digits).
MAX_INT_BITS = 8192
#: Characters any value an expression makes would have as text, a value it holds at several
#: places counted at each: `[[0] * 99999] * 99999` is small in memory but 10**10 items to
#: the C loops that walk it (`==`, `max`, `sorted`, `in`), which no clock can stop.
MAX_SHARED_TEXT = 10_000_000

# -- resolved values (section 6) -----------------------------------------------------------
#: Characters of one parameter's resolved value, written as JSON.
MAX_VALUE_CHARS = 1_000_000
#: Integers of a plan: what every reader of it (orjson, SQLite, the backends) holds exactly,
#: a signed 64-bit integer.
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1

# -- plans (section 3) ---------------------------------------------------------------------
#: The default of `sys.max_experiments`: the most experiments one plan may have.
DEFAULT_MAX_EXPERIMENTS = 1_000_000
#: Bytes of a plan file that `dlbs run --plan` reads: about 80,000 experiments of the
#: default configs, which take about 1 GB of memory and a minute to check and preview.
MAX_PLAN_BYTES = 256 * 2**20

# -- log files (docs/security.md) ----------------------------------------------------------
#: Bytes of one file name (a path's last part): what Linux file systems allow (NAME_MAX),
#: less room for the `.attemptN` that a retry adds and the temporary files' affixes.
MAX_FILE_NAME_BYTES = 255 - 32
#: Bytes of a whole path (PATH_MAX), less the same room.
MAX_PATH_BYTES = 4096 - 32

# -- reading results and traces (docs/security.md) -----------------------------------------
#: Bytes of one line of a log: a list of a million per-batch times fits.
MAX_LINE_BYTES = 16 * 2**20
#: Bytes (decompressed) a trace's parser may read without completing an event.
MAX_EVENT_BYTES = 4 * 2**20
