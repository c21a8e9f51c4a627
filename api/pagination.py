"""Page-number pagination for every list: `?page=2&page_size=100`.

`page` and `page_size`, when given, must be whole numbers from 1 (anything else is a 400 in
the one error format, `errors` naming the parameter); a `page_size` over `max_page_size` is
lowered to it, and a page past the last one is a 404. Every list comes through here, so this
is also where a list's query string is checked: a parameter that is neither a page
parameter nor one of the list's filters is a 400 (`api.filters`).
"""

from __future__ import annotations

from typing import Any

from rest_framework import pagination, serializers
from rest_framework.request import Request

from .filters import filter_names, query_params_known_only


class PageNumberPagination(pagination.PageNumberPagination):
    """Pages of `PAGE_SIZE` rows (settings), up to `max_page_size` on request."""

    page_size_query_param = "page_size"
    max_page_size = 500
    last_page_strings = ()  # `page` is a number (the schema says so); no `?page=last`
    invalid_page_message = "no such page: the list has fewer pages"

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        self._check_numbers(request)
        paging = [self.page_query_param, self.page_size_query_param]
        query_params_known_only(request, [*filter_names(view), *paging])
        return super().paginate_queryset(queryset, request, view)

    def _check_numbers(self, request: Request) -> None:
        errors = {}
        for name in (self.page_query_param, self.page_size_query_param):
            values = request.query_params.getlist(name)
            if not values:
                continue
            if len(values) > 1:
                errors[name] = ["give this parameter once"]
            elif not values[0].isascii() or not values[0].isdigit() or int(values[0]) < 1:
                errors[name] = ["must be a whole number from 1"]
        if errors:
            raise serializers.ValidationError(errors)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1
            if parameter["name"] == self.page_size_query_param:
                parameter["description"] = (
                    f"Rows per page (default {self.page_size}); "
                    f"more than {self.max_page_size} gives {self.max_page_size}."
                )
        return parameters
