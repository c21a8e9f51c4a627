"""Page-number pagination for every list: `?page=2&page_size=100`."""

from __future__ import annotations

from rest_framework import pagination


class PageNumberPagination(pagination.PageNumberPagination):
    """Pages of `PAGE_SIZE` rows (settings), up to `max_page_size` on request."""

    page_size_query_param = "page_size"
    max_page_size = 500
