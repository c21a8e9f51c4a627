"""The crowd-form layout for MTurk's web UI."""

from __future__ import annotations

from annotation.mturk.layout import layout_html
from mitl.judgements import Level


def test_the_layout_is_a_crowd_form_with_every_pairs_fields():
    html = layout_html(pairs=3, followups=True)
    assert '<script src="https://assets.crowd.aws/crowd-html-elements.js"></script>' in html
    assert "<crowd-form>" in html and "</crowd-form>" in html
    assert 'name="answers"' in html and 'value="${hit_id}"' in html
    for n in (1, 2, 3):
        assert f'data-item="${{item_{n}}}"' in html
        assert f'<img src="${{image_url_{n}}}"' in html
        assert f"<blockquote>${{caption_{n}}}</blockquote>" in html
        for level in Level:
            assert f'name="level_{n}" value="{level.value}"' in html
        assert f'name="why_{n}_wrong_description"' in html
        assert f'name="concept_{n}_quantity"' in html
        assert f'name="other_{n}"' in html
    assert "pair_4" not in html and "level_4" not in html
    assert "golden" not in html.lower()
    assert "why_1_" not in layout_html(pairs=1, followups=False)
