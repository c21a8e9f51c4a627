"""Querysets compiled to SQL once per database, then run again with fresh values.

The crowd's submit and hand-out issue the same dozen statements for every HIT, and
building and compiling them through the ORM every time was half of the Python time per
HIT (benchmarks/README.md, "Statements per HIT"). A `Prepared` statement is still written
as a queryset, so its SQL is exactly what the ORM sends on that database (row locks on
PostgreSQL, none on SQLite): the queryset is built once with stand-in ids for its
parameters, compiled by the connection's own compiler, and its SQL kept; each run passes
the real ids in the stand-ins' places and applies the column converters the ORM would
(JSON, datetimes on SQLite). Rows come back as tuples (`rows`), or as the queryset's model
instances with their `select_related` rows attached (`objects`), made as the ORM makes them.

Only whole-number parameters can be prepared (ids, counts): other values are the
statement's constants, fixed when it is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators
from django.db.models.sql import Query, UpdateQuery

# Stand-ins for the parameters while compiling: whole numbers that fit a 32-bit column
# (the ORM refuses larger ones for an integer lookup) and no row or constant ever holds.
_STAND_IN = 2_000_000_000
M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]  # the constants, with stand-ins where parameters go
    slots: tuple[tuple[int, int], ...]  # (position in params, parameter number)
    converters: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]
    width: int | None  # the columns callers see, when the SQL selects more (ordering)
    select: list[Any]  # the compiler's selected columns and what they build (`objects`)
    klass_info: dict[str, Any] | None


class Prepared:
    """One statement: `build(*ids)` returns its queryset (or an update query)."""

    def __init__(self, build: Callable[..., QuerySet[Any] | Query], arity: int) -> None:
        self._build = build
        self._arity = arity
        self._compiled: dict[tuple[str, str], _Compiled] = {}

    def rows(self, *ids: int) -> list[tuple[Any, ...]]:
        """Run the statement with these ids in its parameters' places; return its rows."""
        compiled = self._compiled_here()
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, _params(compiled, ids))
            rows = cursor.fetchall()
        if compiled.width is not None:
            rows = [row[: compiled.width] for row in rows]
        if not compiled.converters:
            return [tuple(row) for row in rows]
        return [_converted(row, compiled.converters) for row in rows]

    def objects(self, *ids: int) -> list[Any]:
        """Run a model queryset's statement; return its instances, as iterating it would."""
        compiled = self._compiled_here()
        info = compiled.klass_info
        if info is None:
            raise TypeError("objects() needs a queryset of model instances, not of values")
        start, end = info["select_fields"][0], info["select_fields"][-1] + 1
        names = [column[0].target.attname for column in compiled.select[start:end]]
        populators = get_related_populators(info, compiled.select, connection.alias)
        instances = []
        for row in self.rows(*ids):
            instance = info["model"].from_db(connection.alias, names, row[start:end])
            for populator in populators:
                populator.populate(row, instance)
            instances.append(instance)
        return instances

    def execute(self, *ids: int) -> int:
        """Run a statement that writes (an update); return the number of rows it touched."""
        compiled = self._compiled_here()
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, _params(compiled, ids))
            return cursor.rowcount

    def _compiled_here(self) -> _Compiled:
        key = (connection.alias, connection.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile()
        return compiled

    def _compile(self) -> _Compiled:
        stand_ins = [_STAND_IN + number for number in range(self._arity)]
        built = self._build(*stand_ins)
        query = built.query if isinstance(built, QuerySet) else built
        compiler = query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()
        slots = tuple(
            (position, stand_ins.index(value))
            for position, value in enumerate(params)
            if type(value) is int and value in stand_ins
        )
        if {number for _, number in slots} != set(range(self._arity)):
            raise ValueError(f"a parameter is missing from the prepared SQL: {sql}")
        select = getattr(compiler, "select", None) or []
        fields = [column[0] for column in select[: compiler.col_count]] if select else []
        converters = compiler.get_converters(fields) if fields else {}
        return _Compiled(
            sql=sql,
            params=tuple(params),
            slots=slots,
            converters=tuple(
                (pos, tuple(convs), expr) for pos, (convs, expr) in converters.items()
            ),
            width=compiler.col_count if select and compiler.has_extra_select else None,
            select=list(select),
            klass_info=getattr(compiler, "klass_info", None),
        )


def _params(compiled: _Compiled, ids: Sequence[int]) -> list[Any]:
    params = list(compiled.params)
    for position, number in compiled.slots:
        params[position] = ids[number]
    return params


def _converted(row: Sequence[Any], converters: tuple[Any, ...]) -> tuple[Any, ...]:
    values = list(row)
    for position, convs, expression in converters:
        value = values[position]
        for converter in convs:
            value = converter(value, expression, connection)
        values[position] = value
    return tuple(values)


def update_query(queryset: QuerySet[Any], **values: Any) -> Query:
    """The UPDATE that `queryset.update(**values)` sends, to prepare (`Prepared.execute`)."""
    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    return query


def field_names(model: type[Model], *, leave_out: Sequence[str] = ()) -> list[str]:
    """The attribute names of a model's stored columns, in its fields' order."""
    return [f.attname for f in model._meta.concrete_fields if f.name not in leave_out]


def model_from_row(model: type[M], names: Sequence[str], values: Sequence[Any]) -> M:
    """A model instance of a row's values, as the ORM makes it (`Model.from_db`); the
    columns `names` leaves out are deferred: read on first use."""
    return model.from_db(connection.alias, names, values)
