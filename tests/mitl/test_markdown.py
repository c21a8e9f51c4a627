"""The datasheet renderer: the Markdown a release's README.md uses, with every input escaped."""

from __future__ import annotations

from mitl.markdown import markdown_render


def test_headings_paragraphs_and_emphasis():
    html = markdown_render("# Title\n\nSome **bold** and *italic* text\nwrapped.\n\n### Small")
    assert html == (
        "<h1>Title</h1>\n<p>Some <strong>bold</strong> and <em>italic</em> text wrapped.</p>\n"
        "<h3>Small</h3>"
    )


def test_lists_bulleted_and_numbered():
    assert markdown_render("- a\n- `b`\n\n1. one\n2. two") == (
        "<ul><li>a</li><li><code>b</code></li></ul>\n<ol><li>one</li><li>two</li></ol>"
    )


def test_a_table_right_after_a_paragraph_line():
    html = markdown_render("Counts:\n| a | b |\n|---|:-:|\n| 1 | 2 |\n")
    assert html == (
        "<p>Counts:</p>\n<table><thead><tr><th>a</th><th>b</th></tr></thead>"
        "<tbody><tr><td>1</td><td>2</td></tr></tbody></table>"
    )


def test_a_fenced_code_block_is_kept_verbatim_and_escaped():
    html = markdown_render("```bash\npython manage.py evaluate --x <FILE> **not bold**\n```")
    assert html == (
        "<pre><code>python manage.py evaluate --x &lt;FILE&gt; **not bold**</code></pre>"
    )


def test_html_and_links_stay_text():
    html = markdown_render(
        '<script>alert("x")</script>\n\n[click](javascript:alert(1)) <img src=x onerror=y>'
    )
    assert "<script" not in html and "<img" not in html and "<a" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_code_spans_are_not_emphasised():
    assert markdown_render("`a*b*c` and *d*") == "<p><code>a*b*c</code> and <em>d</em></p>"


def test_empty_text_gives_nothing():
    assert markdown_render("") == ""
    assert markdown_render("\n\n") == ""
