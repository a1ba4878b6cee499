#!/usr/bin/env python3
"""Generate cases.jsonl: template + context -> what Python Jinja2 renders.

The environment is the one transformers builds for apply_chat_template (and
the one ../../../shared/fixtures/tokenizers/render_jinja2.py uses for the
goldens): ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols]), tojson = json.dumps(ensure_ascii=False, ...),
raise_exception and strftime_now. strftime_now reads a fixed clock here,
2025-07-01 09:05:03.123456 (naive), which the Go test passes as Options.Now.

Each output line: {"name", "template", "context", "ok", "text"} or
{..., "ok": false, "error": "<ExceptionType>: <message>"}.

Usage: python3 gen_cases.py > cases.jsonl   (needs jinja2; tested with 3.1.6)
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime(2025, 7, 1, 9, 5, 3, 123456)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return NOW.strftime(fmt)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

CASES = []


def case(group, template, **context):
    CASES.append((group, template, context))


def cases(group, templates, **context):
    for t in templates:
        case(group, t, **context)


# --- printing: None, bools, numbers, strings, containers -------------------
cases("print", [
    "{{ none }}|{{ None }}|{{ true }}|{{ False }}",
    "{{ 1 }} {{ -1 }} {{ 0 }} {{ 1.0 }} {{ -0.0 }} {{ 1.5 }} {{ 0.1 }}",
    "{{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.0001 }} {{ 1.5e300 }} {{ 123456789.123456789 }}",
    "{{ 2**62 }} {{ 2**64 }} {{ -2**63 }} {{ 10**20 }} {{ 2**100 }}",
    "{{ 0.1 + 0.2 }} {{ 1/3 }} {{ 2/3 }} {{ 10/4 }} {{ 1e300*1e10 }} {{ -1e300*1e10 }}",
    "{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}",
    "{{ ('a',) }} {{ () }} {{ (1, 2) }} {{ {} }} {{ [] }}",
    "{{ {'b': 1, 'a': 2, 3: 'x', none: 1, 1.5: 2} }}",
    "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'back\\\\slash'] }}",
    "{{ ['\\n', '\\t', '\\r', '\\x00', '\\x7f', '\\x85', '\\xa0', '\\u200b', '\\ufeff', 'é', '日本', '😀'] }}",
    "{{ x }}|{{ x.a }}|{{ x.b }}|{{ x.c }}|{{ x.d }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ 1.0 ~ [1] }}",
    "{{ 1, 2 }}",
    "{% print 'a', 'b' %}",
    "{{ 1 if false }}|{{ (1 if false) is none }}|{{ 1 if true }}",
], x={"a": 1.0, "b": [1.0, 2.5e-7], "c": None, "d": {"k": [True, False]}})
cases("print-json-numbers", [
    "{{ n.i }} {{ n.f }} {{ n.e }} {{ n.big }} {{ n.neg0 }} {{ n.small }}",
    "{{ n|tojson }}",
    "{{ n.i is integer }} {{ n.f is float }} {{ n.e is float }} {{ n.big is integer }}",
], n={"i": 1, "f": 1.0, "e": 1e5, "big": 12345678901234567890123, "neg0": -0.0, "small": 1e-7})

# --- whitespace control, trim_blocks, lstrip_blocks ------------------------
cases("ws", [
    "a\n{% if true %}\nb\n{% endif %}\nc",
    "a\n  {% if true %}\n  b\n  {% endif %}\nc",
    "a\n\t {% if true %}x{% endif %} \nc",
    "  {{ 'v' }}  \n  {% set x = 1 %}  \nz",
    "a  {%- if true %} b {% endif -%}  c",
    "a {{- ' b ' -}} c",
    "a\n  {%+ if true %}x{% endif %}\nb",
    "a\n{% if true +%}\nx{% endif %}\nb",
    "a\n  {# comment #}\nb",
    "a {#- comment -#} b",
    "a\n{# comment +#}\nb",
    "{% raw %}\n{{ not evaluated }} {% if %}\n{% endraw %}\nafter",
    "x  {%- raw -%}  raw  {%- endraw -%}  y",
    "line1\r\nline2\rline3\n",
    "trailing newline kept once\n\n",
    "{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}\n",
    "{% for i in [1,2] -%}\n  {{ i }}\n{%- endfor %}",
    "  {% for i in [1,2] %}{{ i }}{% endfor %}  ",
    "{{ 'a' }}\n  {% if true %}b{% endif %}",
    "{% if true %}  {% if true %}x{% endif %}{% endif %}",
    "text {% if true %}\n  indented\n{% endif %}\n",
    "\u3000{% if true %}x{% endif %}",
    "a\n\u00a0\u00a0{% if true %}x{% endif %}",
    "{%- if true -%}\n\n  x  \n\n{%- endif -%}\n",
    "a\n{%- set x = 1 %}\nb",
])

# --- loops and loop variables ----------------------------------------------
cases("loop", [
    "{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
    "{% for x in items %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}",
    "{% for x in items %}{{ loop.cycle('odd', 'even') }} {% endfor %}",
    "{% for x in items if x != 'b' %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}",
    "{% for x in [] %}x{% else %}empty{% endfor %}",
    "{% for x in items if false %}x{% else %}none passed{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
    "{% for k in d %}{{ k }},{% endfor %}",
    "{% for a, (b, c) in [(1, (2, 3)), (4, (5, 6))] %}{{ a }}{{ b }}{{ c }}{% endfor %}",
    "{% for c in 'héllo' %}{{ c }}.{% endfor %}",
    "{% for x in items %}{% for y in items %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}{% endfor %}",
    "{% for x in items %}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ x }}{% endfor %}",
    "{% for x in items %}{% if x == 'b' %}{% continue %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in items %}{% if x == 'b' %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in items %}{% for y in [1, 2] %}{% if y == 2 %}{% break %}{% endif %}{{ x }}{{ y }}{% endfor %}{% endfor %}",
    "{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
    "{% for i in range(3) %}{% set inner = i %}{% endfor %}{{ inner }}|",
    "{% for i in range(5, 0, -2) %}{{ i }}{% endfor %} {{ range(3) }} {{ range(1, 10, 3)|list }}",
    "{% for x in items %}{{ loop.changed(x) }}{% endfor %}{% for x in [1,1,2] %}{{ loop.changed(x) }}{% endfor %}",
    "{% for item in tree recursive %}{{ item.n }}{% if item.c %}({{ loop(item.c) }}){% endif %}{% endfor %}",
    "{% for item in tree recursive %}{{ loop.depth }}{{ loop.depth0 }}{% if item.c %}{{ loop(item.c) }}{% endif %}{% endfor %}",
    "{% for x in none %}{% endfor %}",
    "{% for x in 42 %}{% endfor %}",
    "{% for x in undefined_var %}x{% else %}empty{% endfor %}",
    "{% for a, b in [1, 2] %}{% endfor %}",
    "{% for a, b in [(1, 2, 3)] %}{% endfor %}",
    "{% for x in items %}{{ loop }}{% endfor %}",
    "{{ loop }}|",
    "{% for x in items %}{% set loop_alias = loop %}{% endfor %}ok",
    "{% for x in range(3) %}{{ x }}{% endfor %}{{ x }}|",
], items=["a", "b", "c"], d={"z": 1, "a": 2, "m": 3},
   tree=[{"n": "a", "c": [{"n": "b", "c": []}, {"n": "c", "c": [{"n": "d"}]}]}, {"n": "e"}])
cases("loopcontrols-outside", ["{% break %}", "{% macro m() %}{% continue %}{% endmacro %}"])

# --- set, namespace, with, scoping -----------------------------------------
cases("set", [
    "{% set a = 1 %}{% set b, c = 2, 3 %}{{ a }}{{ b }}{{ c }}",
    "{% set a, b = 'xy' %}{{ a }}-{{ b }}",
    "{% set x %}block {{ 1 + 1 }}{% endset %}[{{ x }}]",
    "{% set x | upper %}shout{% endset %}{{ x }}",
    "{% set x | trim | upper %}  padded  {% endset %}[{{ x }}]",
    "{% set ns = namespace(count=0, items=[]) %}{% for i in range(3) %}{% set ns.count = ns.count + i %}{% endfor %}{{ ns.count }} {{ ns.items }}",
    "{% set ns = namespace(a=1) %}{{ ns }} {{ ns.a }} {{ ns.missing }}|{{ ns['a'] }}",
    "{% set ns = namespace({'x': 1}, y=2) %}{{ ns.x }}{{ ns.y }}",
    "{% set d = {} %}{% set d.x = 1 %}",
    "{% set t = (1, 2) %}{{ t[0] }}",
    "{% if true %}{% set leaked = 'yes' %}{% endif %}{{ leaked }}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|",
    "{% set a = 5 %}{% with a = 1, b = a %}{{ b }}{% endwith %}",
    "{% with %}{% set inner = 1 %}{{ inner }}{% endwith %}{{ inner }}|",
    "{% set true = 1 %}",
    "{% set messages = 'shadowed' %}{{ messages }}",
    "{% set x = 1 %}{% set x = x + 1 %}{{ x }}",
], messages=["m"])

# --- macros and call blocks -------------------------------------------------
cases("macro", [
    "{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 2) }}|{{ m(1, c=3) }}|{{ m(b=2, a=1) }}",
    "{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, x=2) }}",
    "{% macro m() %}<{{ caller() }}>{% endmacro %}{% call m() %}inside{% endcall %}",
    "{% macro m(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) m([1, 2]) %}[{{ x * 10 }}]{% endcall %}",
    "{% macro m() %}{{ caller is defined }}{% endmacro %}{{ m() }}",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}",
    "{% macro m() %}{{ outer }}{% endmacro %}{% set outer = 'late' %}{{ m() }}",
    "{% set v = 1 %}{% macro m() %}{{ v }}{% endmacro %}{% set v = 2 %}{{ m() }}",
    "{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}",
    "{% macro m(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ m('x') }}",
    "{% macro m() %}x{% endmacro %}{{ m }}|{{ m.name }}",
    "{% macro m() %}  padded  {% endmacro %}[{{ m()|trim }}]",
    "{% filter upper %}hello {{ 'world' }}{% endfilter %}",
    "{% filter replace('a', 'o') | upper %}banana{% endfilter %}",
])

# --- if / elif / else, expressions ------------------------------------------
cases("if", [
    "{% if a %}A{% elif b %}B{% else %}C{% endif %}",
    "{% if not a and b or c %}x{% else %}y{% endif %}",
    "{{ a or 'default' }} {{ b and 'both' }} {{ c and 'x' }} {{ (none or 0) }} {{ '' or [] }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ none == none }}",
    "{{ [1, 2] == [1, 2] }} {{ [1, 2] == (1, 2) }} {{ {'a': 1} == {'a': 1.0} }} {{ [1, [2]] < [1, [3]] }}",
    "{{ 'abc' < 'abd' }} {{ 'Z' < 'a' }} {{ 'é' > 'z' }} {{ (1, 2) < (1, 3) }}",
    "{{ 1 < 'a' }}",
    "{{ none < 1 }}",
    "{{ [1] < (1,) }}",
    "{{ {} < {} }}",
    "{{ 1 == 'a' }} {{ none != 0 }} {{ [] == {} }}",
    "{{ 'a' if a else 'b' }} {{ 'x' if b }} {{ 'p' if c else 'q' if a else 'r' }}",
    "{{ not none }} {{ not [] }} {{ not [0] }} {{ not '' }} {{ not ' ' }} {{ not 0.0 }} {{ not {} }}",
    "{% if undefined_var %}y{% else %}n{% endif %}",
    "{% if [] %}y{% elif {} %}d{% elif 0.0 %}f{% elif '0' %}s{% endif %}",
], a=0, b="yes", c=[1])

# --- arithmetic --------------------------------------------------------------
cases("math", [
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 2.0 ** 0.5 }} {{ (-8) ** 2 }}",
    "{{ 1 + 2 * 3 - 4 / 2 }} {{ (1 + 2) * 3 }} {{ 10 / 5 }} {{ 3 * 1.5 }} {{ true + true }} {{ -true }}",
    "{{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [1] * 3 }} {{ 'a' * 0 }} {{ 'a' * -1 }} {{ (1, 2) * 2 }}",
    "{{ 'a' + 'b' }} {{ [1] + [2] }} {{ (1,) + (2,) }}",
    "{{ 'a' + 1 }}",
    "{{ 1 + 'a' }}",
    "{{ [1] + (2,) }}",
    "{{ 1 / 0 }}",
    "{{ 1 // 0 }}",
    "{{ 1 % 0 }}",
    "{{ 1.0 / 0 }}",
    "{{ 5 // 0.0 }}",
    "{{ - 'a' }}",
    "{{ 9223372036854775807 + 1 }} {{ -9223372036854775808 - 1 }} {{ 3037000500 * 3037000500 }}",
    "{{ 1e308 * 10 }} {{ 2 ** 0.5 * 2 ** 0.5 }} {{ 100000000000000000000 / 3 }}",
    "{{ 5 - 3 - 1 }} {{ 2 * 3 % 4 }} {{ 1 - -1 }} {{ +3 }} {{ - -3 }}",
    "{{ '%s and %s' % ('a', 'b') }} {{ '%d%%' % 50 }} {{ '%5.2f|%-5d|%05d|%+d|% d' % (3.14159, 42, 42, 7, 7) }}",
    "{{ '%x %X %o %#x %#o %e %E %g %G' % (255, 255, 8, 255, 8, 12345.678, 0.000012, 1e-5, 123456789.0) }}",
    "{{ '%s' % [1, 2] }} {{ '%r' % 'q' }} {{ '%(a)s-%(b)d' % {'a': 'x', 'b': 3} }} {{ '%c%c' % (65, 'b') }}",
    "{{ '%s %s' % ('only one',) }}",
    "{{ '%d' % 'x' }}",
    "{{ 'no args' % 5 }}",
    "{{ '%.3s|%10s|%-10s|' % ('abcdef', 'r', 'l') }}",
    "{{ '%g|%g|%g|%g|%g' % (100000, 1000000, 0.0001, 0.00001, 1.5) }}",
])

# --- string methods with arguments ---------------------------------------------
cases("str", [
    "[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}]",
    "[{{ nl.strip('\\n') }}][{{ nl.lstrip('\\n') }}][{{ nl.rstrip('\\n') }}][{{ 'xxaxx'.strip('x') }}][{{ 'abcba'.strip('ab') }}]",
    "[{{ crlf.lstrip('\\n') }}][{{ crlf.strip() }}]",
    "{{ 'a b  c'.split() }} {{ 'a b  c'.split(' ') }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,,c'.split(',') }} {{ '  x  y '.split(None, 1) }}",
    "{{ 'a b c'.rsplit(' ', 1) }} {{ '  a  b  c  '.rsplit(None, 1) }} {{ 'a</think>b</think>c'.split('</think>') }} {{ ''.split() }} {{ ''.split(',') }}",
    "{{ 'x'.split(sep=',', maxsplit=0) }} {{ 'a,b,c'.split(',', maxsplit=-1) }}",
    "{{ 'a'.split('') }}",
    "{{ 'hello'.startswith('he') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith('lo') }} {{ 'hello'.endswith(('a', 'b')) }} {{ 'hello'.startswith('l', 2) }} {{ 'hello'.startswith('', 5) }} {{ 'hello'.startswith('', 6) }}",
    "{{ 'hello'.startswith(1) }}",
    "{{ 'hello'.replace('l', 'L') }} {{ 'hello'.replace('l', 'L', 1) }} {{ 'abc'.replace('', '-') }} {{ 'abc'.replace('', '-', 2) }} {{ 'aaa'.replace('a', 'b', 0) }}",
    "{{ 'Hello World'.upper() }} {{ 'Hello World'.lower() }} {{ \"they're bill's friends\".title() }} {{ 'hELLO wORLD'.capitalize() }} {{ 'Hello'.swapcase() }}",
    "{{ 'straße'.upper() }} {{ 'ΑΣ ΟΔΟΣ'.lower() }} {{ 'ǆ'.title() }} {{ 'ß'.title() }} {{ 'İ'.lower()|length }} {{ 'ﬁ'.upper() }}",
    "{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }} {{ 'hello'.find('l', 3) }} {{ 'hello'.find('', 10) }} {{ 'hello'.count('l') }} {{ 'hello'.count('') }} {{ 'aaaa'.count('aa') }}",
    "{{ 'hello'.index('e') }}",
    "{{ 'hello'.index('z') }}",
    "{{ ', '.join(['a', 'b']) }} {{ ''.join('abc') }} {{ '-'.join({'x': 1, 'y': 2}) }}",
    "{{ ', '.join([1, 2]) }}",
    "{{ 'ab'.center(6) }}|{{ 'ab'.center(7, '*') }}|{{ 'ab'.ljust(5, '.') }}|{{ 'ab'.rjust(5) }}|{{ '42'.zfill(5) }}|{{ '-42'.zfill(5) }}",
    "{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'abc'.partition('x') }}",
    "{{ 'line1\\nline2\\r\\nline3\\rline4\\x0bline5\\x1cline6\\u2028line7'.splitlines() }} {{ 'a\\nb\\n'.splitlines(true) }} {{ ''.splitlines() }}",
    "{{ '123'.isdigit() }} {{ '12a'.isdigit() }} {{ '²'.isdigit() }} {{ '²'.isdecimal() }} {{ 'abc'.isalpha() }} {{ 'ab1'.isalnum() }} {{ '  '.isspace() }} {{ ''.isspace() }} {{ 'Abc'.istitle() }} {{ 'abc'.islower() }} {{ 'ABC1'.isupper() }} {{ 'a_1'.isidentifier() }} {{ '1a'.isidentifier() }}",
    "{{ 'prefix-body'.removeprefix('prefix-') }} {{ 'body.txt'.removesuffix('.txt') }} {{ 'a\\tb'.expandtabs(4) }}",
    "{{ '{} and {}'.format('x', 'y') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='n') }} {{ '{0[k]} {0.k}'.format({'k': 'v'}) }} {{ '{:>5}|{:<5}|{:^5}|{:05.1f}|{:,}'.format('r', 'l', 'c', 3.14159, 1234567) }}",
    "{{ '{!r} {!s}'.format('q', 1.0) }} {{ '{{literal}}'.format() }} {{ '{:x} {:#b} {:e} {:.2%} {:g}'.format(255, 5, 1234.5, 0.256, 0.00001) }} {{ '{:.3}'.format(3.14159) }} {{ '{}'.format(1e16) }}",
    "{{ 'abc'[0] }} {{ 'abc'[-1] }} {{ 'abc'[5] }}|{{ 'héllo'[1] }} {{ 'abc'.upper is callable }}",
    "{{ s.foo }}|{{ s.__class__ }}|",
    "{{ 'a%sb' % 'X' }} {{ 'x'.join(['1', '2', '3']) }} {{ 'X'.lower().upper() }}",
    "{{ content.split('</think>')[-1].lstrip('\\n') }}|{{ content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
], s="  \t padded \n ", nl="\n\nbody\n\n", crlf="\r\n body", content="<think>\nreasoning\n</think>\n\nanswer")

# --- slicing -----------------------------------------------------------------
cases("slice", [
    "{{ l[1:] }} {{ l[:2] }} {{ l[::2] }} {{ l[::-1] }} {{ l[-2:] }} {{ l[1:-1] }} {{ l[10:] }} {{ l[-10:2] }} {{ l[3:1] }} {{ l[3:1:-1] }}",
    "{{ s[1:3] }} {{ s[::-1] }} {{ s[-3:] }} {{ s[:0] }}|{{ 'héllo wörld'[1:8] }}",
    "{{ t[1:] }} {{ t[::-1] }} {{ t[0] }} {{ range(10)[2:5] }}",
    "{{ l[::0] }}",
    "{{ l[1.5] }}|{{ l['a'] }}|{{ l[10] }}|{{ l[-10] }}|{{ l[true] }}",
    "{{ l[1:'a'] }}|",
    "{{ messages[-1].content }} {{ messages[0]['role'] }} {{ messages.0.role }}",
    "{% for m in messages[::-1] %}{{ m.role }} {% endfor %}",
    "{{ d['k'] }} {{ d.k }} {{ d['missing'] }}|{{ d.missing }}|{{ d[1] }}|{{ d['items'] }}",
], l=[0, 1, 2, 3, 4], s="hello", t=[1, 2, 3],
   messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], d={"k": "v", "items": "shadow"})

# --- Undefined ---------------------------------------------------------------
cases("undefined", [
    "[{{ u }}][{{ u|default('d') }}][{{ u|d('d') }}][{{ u is defined }}][{{ u is undefined }}][{{ u|length }}][{{ u|string }}][{{ u ~ 'x' }}]",
    "{{ u.attr }}",
    "{{ u['key'] }}",
    "{{ u + 1 }}",
    "{{ u() }}",
    "{{ u < 1 }}",
    "{{ u == u }} {{ u != none }} {{ u is none }} {{ u in [1] }} {{ 1 in u }}",
    "{{ u|list }} {{ u|join(',') }}|{{ u|upper }}|{{ u|trim }}|{{ u|first }}|{{ u|last }}|{{ u|items|list }}",
    "{{ u|int }}",
    "{{ u|float }}",
    "{{ u|tojson }}",
    "{{ u|sum }}",
    "{{ u is sequence }} {{ u is iterable }} {{ u is callable }} {{ u is mapping }} {{ u is string }}",
    "{{ d.missing is defined }} {{ d.missing.deeper is defined }}",
    "{{ d.missing|default('fallback') }} {{ none|default('x') }} {{ ''|default('e', true) }} {{ 0|default('z', boolean=true) }}",
    "{{ none.attr }}|{{ none['x'] }}|{{ 5.attr }}|",
    "{{ x.y.z }}",
    "{% if u %}t{% else %}f{% endif %}{% if not u %}!{% endif %}",
    "{{ [].append }}|{{ {}.pop }}|{{ {}.update }}|",
    "{{ [].append(1) }}",
    "{{ {'a': 1}.update({'b': 2}) }}",
    "{{ {}.__class__ }}|",
], d={"k": 1})

# --- filters -------------------------------------------------------------------
cases("filters-str", [
    "[{{ '  x  '|trim }}][{{ 'xxyxx'|trim('x') }}][{{ '\\u00a0\\ufeffx\\ufeff\\u00a0'|trim }}][{{ '\\x1cx\\x1f'|trim }}]",
    "{{ 'hello world'|upper }} {{ 'HELLO'|lower }} {{ 'hello wORLD-foo(bar'|title }} {{ 'hELLO'|capitalize }}",
    "{{ 'aXbXc'|replace('X', '-') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 1234|replace('2', 'x') }}",
    "{{ 'ab'|center(8) }}|{{ 'abc'|center }}|",
    "{{ 'one two  three'|wordcount }} {{ 'a_b c-d'|wordcount }}",
    "{{ 'a long sentence here'|truncate(9) }}|{{ 'a long sentence here'|truncate(9, true) }}|{{ 'a long sentence here'|truncate(12, false, '..', 0) }}|{{ 'short'|truncate(3) }}",
    "{{ '<b>bold</b> &amp; <!-- c --> text'|striptags }}",
    "{{ '<a>'|e }} {{ '<a>'|escape }} {{ ('<a>'|e)|e }} {{ '<a>'|safe }} {{ '<a>'|forceescape }} {{ ('<x>'|safe) + '<y>' }} {{ '<x>' + ('<y>'|safe) }} {{ ('<x>'|safe) ~ '<y>' }}",
    "{{ 'line1\\nline2\\n\\nline4'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}|{{ 'a\\nb'|indent(first=true) }}",
    "{{ '%s-%s'|format('a', 'b') }} {{ '%(x)s'|format(x='y') }} {{ 42|string }} {{ [1, 'a']|string }} {{ {'k': none}|string }}",
    "{{ 'hello'|length }} {{ 'héllo'|count }} {{ [1, 2]|length }} {{ {'a': 1}|length }}",
    "{{ 'a b'|urlencode }} {{ {'k': 'v w', 'x': 1}|urlencode }} {{ 'a/b?c=d'|urlencode }}",
    "{{ 1000|filesizeformat }} {{ 1|filesizeformat }} {{ 1500000|filesizeformat }} {{ 2048|filesizeformat(true) }}",
    "{{ 42|length }}",
])
cases("filters-num", [
    "{{ '42'|int }} {{ '42.9'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ -3.9|int }} {{ true|int }} {{ none|int }} {{ '0x1f'|int(0, 16) }} {{ '1_000'|int }} {{ ' 12 '|int }} {{ '1e3'|int }}",
    "{{ '3.5'|float }} {{ 'x'|float }} {{ 2|float }} {{ '1e3'|float }} {{ 'inf'|float }} {{ ' -1_0.5 '|float }} {{ none|float(1.5) }}",
    "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 42.55|round(1, 'floor') }} {{ 42.51|round(1, 'ceil') }} {{ 5|round }} {{ -2.5|round }} {{ 1234|round(-2) }} {{ 1250|round(-2) }}",
    "{{ -5|abs }} {{ -2.5|abs }} {{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ [{'v': 1}, {'v': 2}]|sum(attribute='v') }} {{ [[1], [2]]|sum(start=[]) }}",
    "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A', 'c']|min }} {{ ['b', 'A', 'c']|max(case_sensitive=true) }} {{ []|max }}|{{ [{'a': 2}, {'a': 1}]|min(attribute='a') }}",
    "{{ 'abc'|abs }}",
    "{{ inf|float|int }}",
    "{{ nan|float|int }}",
], inf="inf", nan="nan")
cases("filters-seq", [
    "{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['b', 'A', 'a', 'B']|sort }} {{ ['b', 'A', 'a', 'B']|sort(case_sensitive=true) }}",
    "{{ users|sort(attribute='age')|map(attribute='name')|list }} {{ users|sort(attribute='age,name')|map(attribute='name')|join(',') }}",
    "{{ [1, 'a']|sort }}",
    "{{ ['a', 'A', 'b', 'a']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ users|unique(attribute='age')|map(attribute='name')|list }}",
    "{{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ d|dictsort(by='value') }} {{ {'b': 1, 'A': 2}|dictsort }} {{ {'b': 1, 'A': 2}|dictsort(true) }}",
    "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ 'abc'|last }} {{ {'x': 1, 'y': 2}|first }} {{ {'x': 1, 'y': 2}|last }} {{ []|first }}|{{ []|last }}|",
    "{{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }} {{ (1, 2)|reverse|list }} {{ {'a': 1, 'b': 2}|reverse|list }}",
    "{{ [1, 2]|reverse|length }}",
    "{{ 'abc'|list }} {{ {'a': 1}|list }} {{ (1, 2)|list }} {{ range(3)|list }}",
    "{{ [1, 2, 3]|join }} {{ [1, 2, 3]|join(', ') }} {{ users|join('; ', attribute='name') }} {{ {'a': 1, 'b': 2}|join('') }}",
    "{{ users|map(attribute='name')|join(',') }} {{ ['a', 'b']|map('upper')|list }} {{ ['1', '2']|map('int')|sum }} {{ users|map(attribute='nick', default='?')|list }} {{ [' a ', 'b ']|map('trim')|list }} {{ ['x']|map('replace', 'x', 'y')|list }}",
    "{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ [1, 2, 3]|select('>', 1)|list }} {{ [1, 2, 3]|select('in', [2, 3])|list }} {{ ['a', 1]|select('string')|list }}",
    "{{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|list }} {{ users|selectattr('name', 'equalto', 'bob')|list|length }} {{ users|selectattr('age', 'gt', 20)|map(attribute='name')|list }} {{ msgs|selectattr('role', '==', 'user')|list|length }}",
    "{% if []|select %}truthy generator{% endif %} {{ []|select|list }}",
    "{% set g = [1, 2, 3]|select %}{{ g|list }}{{ g|list }}",
    "{{ [1, 2]|map('string') is iterable }}",
    "{{ [1, 2]|select|first }} {{ ([1, 2]|select|list)|last }}",
    "{{ [1, 2]|select|last }}",
    "{{ [1, 2]|select|length }}",
    "{{ {'a': 1, 'b': [2]}|items|list }} {{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items() }} {{ d.keys() }}",
    "{{ [1, 2]|items|list }}",
    "{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}",
    "{{ users|groupby('admin')|list }}",
    "{% for g in users|groupby('age') %}{{ g.grouper }}:{{ g.list|map(attribute='name')|join('+') }} {% endfor %}",
    "{% for grouper, list in users|groupby('admin') %}{{ grouper }}={{ list|length }} {% endfor %}",
    "{{ range(7)|batch(3)|list }} {{ range(7)|batch(3, 'x')|list }} {{ range(7)|slice(3)|list }} {{ range(7)|slice(3, 'f')|list }}",
    "{{ users[0]|attr('name') }}|{{ 'abc'|attr('upper') is callable }}|{{ users|attr('length') }}|",
    "{{ msgs|map(attribute='content')|map('length')|sum }} {{ msgs|length }}",
    "{{ [1, 2]|map('nope')|list }}",
    "{{ [1, 2]|select('nope')|list }}",
], users=[{"name": "bob", "age": 30, "admin": True}, {"name": "amy", "age": 20, "admin": False},
          {"name": "cal", "age": 30, "admin": False}],
   d={"b": 2, "a": 3, "c": 1}, msgs=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])

# --- tojson ---------------------------------------------------------------------
cases("tojson", [
    "{{ v|tojson }}",
    "{{ v|tojson(indent=2) }}",
    "{{ v|tojson(indent=0) }}",
    "{{ v|tojson(indent='\\t') }}",
    "{{ v|tojson(sort_keys=true) }}",
    "{{ v|tojson(ensure_ascii=true) }}",
    "{{ v|tojson(separators=(',', ':')) }}",
    "{{ v|tojson(true) }}",
    "{{ [1.0, 1e16, 1e-7, -0.0, 0.1, 12345678901234567890, true, none]|tojson }}",
    "{{ {'b': 1, 'a': {'d': [], 'c': {}}}|tojson }} {{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}",
    "{{ {1: 'int key', 1.5: 'float key', true: 'bool', none: 'null'}|tojson }}",
    "{{ '\"quote\" \\\\ \\n \\t \\x01 \\x7f é 😀 \\u2028'|tojson }} {{ '\"q\" é 😀'|tojson(ensure_ascii=true) }}",
    "{{ (1, 'a')|tojson }} {{ ('<a>'|safe)|tojson }}",
    "{{ ('inf'|float)|tojson }} {{ ('-inf'|float)|tojson }} {{ ('nan'|float)|tojson }} {{ ('inf'|float) }}",
    "{{ range(3)|tojson }}",
    "{{ namespace(a=1)|tojson }}",
    "{{ {(1, 2): 'tuple key'}|tojson }}",
    "{% for tool in tools %}{{ tool|tojson }}\n{% endfor %}",
    "{{ [{}]|tojson(indent=2) }} {{ {'a': []}|tojson(indent=2) }}",
], v={"z": 1, "a": [1, 2.5, {"x": None, "y": True}], "é": "ü", "n": 1.0, "big": 1e20},
   tools=[{"type": "function", "function": {"name": "f", "description": None,
           "parameters": {"type": "object", "properties": {"x": {"type": "number", "default": 0.5}}}}}])

# --- tests ----------------------------------------------------------------------
cases("tests", [
    "{{ 'a' is string }} {{ 1 is string }} {{ none is string }} {{ ('a'|safe) is string }}",
    "{{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ '1' is number }} {{ 1 is integer }} {{ 1.0 is integer }} {{ true is integer }} {{ 1.0 is float }}",
    "{{ {} is mapping }} {{ [] is mapping }} {{ [] is sequence }} {{ 'a' is sequence }} {{ {} is sequence }} {{ 1 is sequence }} {{ [] is iterable }} {{ 1 is iterable }}",
    "{{ none is none }} {{ 0 is none }} {{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ true is boolean }} {{ 1 is boolean }}",
    "{{ 3 is odd }} {{ 3 is even }} {{ 4.0 is even }} {{ 10 is divisibleby 5 }} {{ 10 is divisibleby(3) }}",
    "{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is == 1 }} {{ 2 is gt 1 }} {{ 2 is > 3 }} {{ 1 is lessthan 2 }} {{ 1 is ne 1 }} {{ 2 is ge 2 }} {{ 1 is le 0 }}",
    "{{ 'a' is in 'abc' }} {{ 1 is in [1, 2] }} {{ 'k' is in {'k': 1} }} {{ 'x' is not in ['y'] }}",
    "{{ 'ABC' is upper }} {{ 'abc' is lower }} {{ 'Abc' is upper }} {{ '<a>'|e is escaped }} {{ 'a' is escaped }}",
    "{{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }} {{ range is callable }} {{ 'x' is callable }}",
    "{{ none is sameas none }} {{ 1 is sameas 1 }} {{ [] is sameas [] }}",
    "{{ x is not none }} {{ x is not defined }} {{ not x is defined }}",
    "{{ 'abc' is odd }}",
    "{{ 1 is nosuchtest }}",
], x=1)

# --- in / membership ---------------------------------------------------------------
cases("in", [
    "{{ 'a' in 'cat' }} {{ 'x' in 'cat' }} {{ '' in 'cat' }} {{ 1 in [1, 2] }} {{ 1.0 in [1] }} {{ 'k' in {'k': 1} }} {{ 'v' in {'k': 'v'} }} {{ 2 in (1, 2) }} {{ 3 not in [1] }}",
    "{{ '</think>' in content }} {{ 'a' in ['a'|safe] }} {{ none in [none] }} {{ [1] in [[1]] }}",
    "{{ 1 in 'abc' }}",
    "{{ 'a' in none }}",
    "{{ 'a' in 5 }}",
    "{{ [1] in {'a': 1} }}",
    "{{ 1 in range(3) }} {{ 'k' in {'k': 1}.keys() }} {{ 1 in {'k': 1}.values() }}",
], content="x</think>y")

# --- dict iteration order and dict methods ---------------------------------------------
cases("dict", [
    "{% for k, v in d.items() %}{{ k }}:{{ v }} {% endfor %}{{ d|list }}",
    "{{ d.get('z') }} {{ d.get('missing') }} {{ d.get('missing', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }}",
    "{{ d.items is callable }}",
    "{{ {'b': 1, 'a': 2, 'b': 3} }} {{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }} {{ dict({'k': 1}, z=0) }}",
    "{{ {1: 'a', 1.0: 'b', true: 'c'} }}",
    "{{ {[1]: 2} }}",
    "{{ d|length }} {{ d.items()|length }} {{ d.copy() }}",
    "{% for k in {'c': 1, 'a': 2, 'b': 3} %}{{ k }}{% endfor %}",
    "{{ obj.items is callable }}|{{ obj['items'] }}|{{ obj.keys is callable }}|{{ obj.get('keys') }}|{{ obj.update }}|{{ obj.values is callable }}|",
    "{% if param.items %}has items method{% endif %} {{ param['items']['type'] }}",
], d={"z": 26, "a": 1, "m": 13}, obj={"items": "item-value", "keys": "k", "update": "u"},
   param={"type": "array", "items": {"type": "string"}})

# --- errors and globals --------------------------------------------------------------------
cases("errors", [
    "{{ raise_exception('custom failure') }}",
    "{% if true %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}",
    "{{ strftime_now('%Y-%m-%d %H:%M:%S') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%-d %B %Y, %A %I:%M %p %j %U %W %w %y %f %%') }} [{{ strftime_now('%z%Z') }}]",
    "{{ strftime_now('%a %c %D %e %F %T %R %u %V %G %C %h') }}",
    "{{ range(100001) }}",
    "{{ range(0) }} {{ range(3, 0) | list }} {{ range(0, 10, 3) }}",
    "{{ range(1, 2, 0) }}",
    "{{ 'x'() }}",
    "{{ undefined_fn() }}",
    "{{ joiner }}|{% set j = joiner(', ') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %}",
    "{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}",
    "{{ namespace }}",
    "{% include 'other.html' %}",
    "{% if %}",
    "{% for %}",
    "{% endif %}",
    "{% unknowntag %}",
    "{{ }}",
    "{{ 1 + }}",
    "{% if true %}unclosed",
    "{{ 'unterminated }}",
    "{{ x | nosuchfilter }}",
    "{# unterminated comment",
    "{% raw %}unterminated raw",
    "{{ (1, 2 }}",
    "{{ [1, 2) }}",
    "{{ a.b.c.d.e }}",
    "{% set x = 1 %}{% set x.y = 2 %}",
    "{% macro m(a=1, b) %}{% endmacro %}",
    "{{ 1 is defined is defined }}",
    "{{ x.__class__.__mro__ }}|",
    "{% do x %}",
    "{{ '\\x4' }}",
], x="s")

# --- string escapes and literals ----------------------------------------------------------
cases("literals", [
    "{{ 'tab\\there' }}|{{ \"dq \\\"inner\\\"\" }}|{{ 'sq \\'inner\\'' }}|{{ 'nl\\nx' }}|{{ '\\u00e9\\U0001F600\\x41\\101' }}|{{ 'unknown \\d \\q escape' }}",
    "{{ 'adjacent' 'strings' \"joined\" }}",
    "{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000_000 }} {{ 1_0.5 }} {{ 1E3 }} {{ 1e-3 }} {{ 0_0 }} {{ 12.5e+2 }}",
    "{{ .5 }}",
    "{{ 'multi\nline' }}",
    "{{ True }} {{ TRUE is defined }} {{ none is none }} {{ NONE is defined }}",
    "{{ 'é\\é' }}",
    "{{ [1, 2, ] }} {{ {'a': 1, } }} {{ (1, ) }}",
])

# --- realistic chat-template fragments -------------------------------------------------------
CHAT = [{"role": "system", "content": "  Be brief.  "}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
PARTS = [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"}]},
         {"role": "assistant", "content": "ok"}]
TOOLS = [{"type": "function", "function": {"name": "get", "parameters": {"properties": {"a": {}, "b": {}}}}}]
cases("chat", [
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}{% elif m['role'] == 'assistant' %}{{ m['content'] + eos_token }}{% endif %}{% endfor %}",
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{{ content.strip() }}|{% endfor %}",
    "{%- set today = strftime_now('%d %b %Y') %}Cutting Knowledge Date: December 2023\nToday Date: {{ today }}",
    "{%- for tool in tools %}{{- tool.function.name }}({{ tool.function.parameters.properties|list|join(', ') }}){% endfor %}",
    "{%- if tools is not none and tools|length > 0 %}tools{% else %}no tools{% endif %}",
], bos_token="<s>", eos_token="</s>", add_generation_prompt=True, messages=CHAT, tools=TOOLS)
cases("chat-parts", [
    "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for part in m.content %}{% if part.type == 'text' %}{{ part.text }}{% else %}<{{ part.type }}>{% endif %}{% endfor %}{% endif %}\n{% endfor %}",
    "{% for m in messages %}{{ m.content + '!' }}{% endfor %}",
], messages=PARTS)
cases("chat-alternate", [
    "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{{ message.content }}{% endfor %}",
], messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
cases("chat-none-tools", [
    "{%- if tools %}T{% endif %}{{ tools }}|{{ tools is none }}|{{ tools is defined }}",
], tools=None)


# --- fast paths the renderer takes must keep Python's results ------------------------------
cases("fastpath", [
    "{{ s.split('</think>')[-1] }}|{{ s.split('</think>')[0] }}|{{ s.split('</think>')[5] }}|{{ s.split('</think>')[-9] }}|",
    "{{ s.split('x', 1)[0] }}|{{ s.rsplit('</think>', 1)[0] }}|{{ s.rsplit('</think>', 1)[-1] }}|{{ 'a b  c'.split(' ')[2] }}|",
    "{{ n.split('a')[0] }}",
    "{{ u.split('a')[0] }}",
    "{{ s.split('')[0] }}",
    "{{ m.split('|')[1] }} {{ l.split(',')[0] }}|",
    "{{ ('<a>|<b>'|safe).split('|')[0] }} {{ s.split(none)[0] }} {{ s.split(sep='<')[1] }}",
    "{{ d.update is defined }} {{ d.items is defined }} {{ d.k is defined }} {{ d.nope is defined }} {{ d.nope is undefined }} {{ s.upper is defined }} {{ s.nope is defined }} {{ none.x is defined }} {{ l.count is defined }} {{ l.append is defined }}",
    "{{ u.x is defined }}",
    "{{ 'a' + 1 + 'b' }}",
    "{{ 1 + 2 + 3 }} {{ 'a' + 'b' + ('c'|safe) }} {{ [1] + [2] + [3] }} {{ 1.5 + 1 + true }}",
    "{{ 'x' + u + 'y' }}",
    "{% for i in range(3) %}{% macro m() %}{{ i }}{% endmacro %}{% set f = m %}{% endfor %}{{ f is defined }}",
    "{% set ns = namespace(loops=[]) %}{% for i in range(2) %}{% set ns.loops = ns.loops + [loop.index] %}{% endfor %}{{ ns.loops }}",
    "{% for i in range(3) %}{% set x = i * 2 %}{% for j in range(2) %}{% set y = x + j %}{{ y }}{% endfor %}{% endfor %}",
    "{% for i in range(3) %}{{ v }}{% set v = i %}{% endfor %}",
    "{{ -1 }} {{ - 1 }} {{ -1.5 }} {{ --1 }} {{ -(1) }} {{ [1, 2][-1] }} {{ -2 ** 2 }} {{ (-2) ** 2 }} {{ -true }}",
    "{{ s.strip() is sameas s }} {{ '  a'.lstrip() }}",
], s="<think>r</think>answer</think>tail", n=5, m="a|b|c", l=[1, 2], d={"k": 1, "update": 2})

# --- more filters and tests edge cases --------------------------------------------------------
cases("more-filters", [
    "{{ [3, 2, 1]|sort|first }} {{ [[2, 'b'], [1, 'a']]|sort }} {{ [{'n': 'b'}, {'n': 'A'}]|sort(attribute='n')|map(attribute='n')|list }}",
    "{{ items|selectattr('a.b', 'defined')|list|length }} {{ items|map(attribute='a.b')|list }} {{ items|map(attribute='0')|list }}",
    "{{ [1, 2, 3]|map('string')|join('-') }} {{ ['a', 'b']|map('format', 1)|list }} {{ [['a', 1]]|map('join', '=')|list }}",
    "{{ 'abc'|map('upper')|list }} {{ {'x': 1}|map('upper')|list }} {{ ''|map('upper')|list }} {{ none|select|list }}",
    "{{ [1, none, 2]|reject('none')|list }} {{ [1, 'a', 2.5, [1]]|select('number')|list }} {{ [1, 2, 3, 4, 5, 6]|select('divisibleby', 3)|list }}",
    "{{ [1, 2]|select('equalto', 2)|list }} {{ ['a', 'B']|select('lower')|list }} {{ [{}, [], 'x']|select('mapping')|list }}",
    "{{ [1, 2, 3]|sum(start=10) }} {{ [0.1, 0.2]|sum }} {{ []|sum }}",
    "{{ ['a', 'b']|sum(start='') }}",
    "{{ 'x'|default }} {{ none|default }} {{ false|default('f') }} {{ false|d('f', true) }}",
    "{{ '%s'|format('a', 'b') }}",
    "{{ 'a'|format(x=1, y=2) }} {{ '%(x)s%(y)s'|format(x=1, y=2) }}",
    "{{ 'a'|replace('a', 'b', none) }} {{ 'aaa'|replace('a', 'b', 1) }}",
    "{{ 3.14159|round(2) }} {{ 2.5|round(0, 'floor') }} {{ -0.5|round }} {{ 0.5|round }} {{ 1.5|round }} {{ 1e20|round }} {{ 123.456|round(-1) }}",
    "{{ 'x'|round }}",
    "{{ 10|string|length }} {{ 10|list }}",
    "{{ 'abc'|batch(2)|list }} {{ []|batch(2)|list }} {{ [1, 2, 3]|slice(5)|list }}",
    "{{ {'b': 2, 'a': 1}|dictsort(false, 'key', true) }} {{ {'a': 'B', 'b': 'a'}|dictsort(by='value') }}",
    "{{ {'a': 1}|dictsort(by='x') }}",
    "{{ [1, 2]|dictsort }}",
    "{{ 'Hello World'|wordcount }} {{ ''|wordcount }} {{ '日本語 テスト'|wordcount }}",
    "{{ 'abc'|truncate(2) }}",
    "{{ 'é'|urlencode }} {{ [('a', 'b c'), ('d', 1)]|urlencode }}",
    "{{ 'ÀÉ ß'|lower }} {{ 'àé ß ﬀ'|upper }} {{ 'ǆ ǉ'|title }} {{ 'ǅ'|capitalize }} {{ 'mIxEd CaSe'|title }}",
    "{{ 42|indent }}",
    "{{ 'a\\nb'|indent(width=2, first=true, blank=true) }}",
    "{{ 1|attr('real') }} {{ 1.5|attr('imag') }} {{ 1.5.is_integer() }} {{ 2.0.is_integer() }} {{ (5).bit_length() }}",
    "{{ [1, 2, 3]|max(attribute='x') }}",
    "{{ users|groupby('age')|map(attribute='grouper')|list }} {{ (users|groupby('age'))[0].list|length }} {{ (users|groupby('age'))[0][0] }}",
    "{{ users|groupby('missing', default='?')|map(attribute='grouper')|list }} {{ [{'c': 'A'}, {'c': 'a'}]|groupby('c')|map(attribute='grouper')|list }}",
    "{{ users|unique(attribute='admin')|map(attribute='name')|list }} {{ [1, 1.0, true]|unique|list }}",
    "{{ [[1]]|unique|list }}",
    "{{ 'a'|tojson(indent=2) }} {{ []|tojson(indent=2) }} {{ {'a': {'b': [1, {'c': none}]}}|tojson(indent=1) }}",
    "{{ {'a': 1}|tojson(separators=[',', '=']) }} {{ {'b': 1, 'a': 2}|tojson(none, 2, none, true) }}",
    "{{ {'a': 1}|tojson(indent='ab') }}",
    "{{ x|tojson }}",
], items=[{"a": {"b": 1}}, {"a": {}}, {"a": {"b": None}}], users=[{"name": "bob", "age": 30, "admin": True}, {"name": "amy", "age": 20, "admin": False}],
   x={"f": 0.1, "l": [1e100, -1e-100, 5e-324, 1.7976931348623157e308]})

# --- whitespace control in realistic shapes ---------------------------------------------------
cases("ws-real", [
    "{%- for m in msgs -%}\n    {%- if m.role == 'user' -%}\n        <u>{{ m.content }}</u>\n    {%- else -%}\n        <a>{{ m.content }}</a>\n    {%- endif -%}\n{%- endfor -%}\n",
    "{% for m in msgs %}\n    {% if m.role == 'user' %}\n        <u>{{ m.content }}</u>\n    {% else %}\n        <a>{{ m.content }}</a>\n    {% endif %}\n{% endfor %}\n",
    "{% for m in msgs %}{{ m.role }}:\n{{ m.content }}\n\n{% endfor %}",
    "{%- set x = 1 -%}\n  A\n  {%- if x %}\n  B {{ x }}\n  {%- endif %}\n  C",
    "  {# indented comment #}\n  {%- raw %} raw {% endraw %}",
    "{% macro m(x) -%}\n  [{{ x }}]\n{%- endmacro %}\n{{ m(1) }}\n{{- m(2) }}",
    "{% if true %}\r\n  crlf body\r\n{% endif %}\r\nend",
    "a\n    {%- if true -%}\n    b\n    {%- endif -%}\n    c",
    "{{ 'x' }}   {% if true %}   y   {% endif %}   {{ 'z' }}",
    "\t{%- if true %}tab{% endif %}",
    "a {%+ if true %}b{% endif %} c",
    "{% if true %}a{% endif +%}\n{% if true %}b{% endif -%}\n  c",
], msgs=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])

# --- lexer corners --------------------------------------------------------------------------
cases("lexer", [
    "{{ '}}' }}|{{ \"%}\" }}|{{ '{{' }}|{{ {'a': {'b': 1}} }}|{{ {'a': 1}['a'] }}",
    "{{ [1, [2, [3]]][1][1][0] }} {{ ((1)) }} {{ (1, (2, 3)) }}",
    "{%set x=1%}{{x}}{%if x%}y{%endif%}",
    "{{x}}{{ x }}{{	x	}}{{\nx\n}}",
    "{% set café = 'ok' %}{{ café }} {% set _x1 = 2 %}{{ _x1 }}",
    "{{ 1if true else 2 }}",
    "{{ 'a'~'b'~3 }} {{ 1~2 }}",
    "{{ x.0 }} {{ x.1 }} {{ t.0.1 }}",
    "{{ 1 . real }}",
    "{{ 'a' 'b' }}{{ 'c'\n'd' }}",
    "{{ \"it's\" }} {{ 'say \"x\"' }} {{ '\\\\' }} {{ '\\'' }}",
    "{# {{ not printed }} {% if %} #}ok",
    "{#- strip -#}  x  {#+ keep +#}  y",
    "a{{- ' ' -}}b{%- if true -%} c {%- endif -%}d",
    "{% raw -%}  r  {%- endraw %}",
    "{%- raw %}{% if %}{%- endraw %}",
    "{% raw %}a{% endraw %}{% raw %}b{% endraw %}",
    "{{ 'a' }}{# c #}\n{{ 'b' }}",
    "x {#  multi\nline\ncomment #} y",
    "{% if true %}\n\n{% endif %}",
    "{{ 1 }}\n{{ 2 }}\n",
    "{% for i in [1] %}{% endfor %}\n\n\nx",
    "    {% for i in [1, 2] %}\n    {{ i }}\n    {% endfor %}\n",
    "{{ 10_000 }} {{ 0x_ff }} {{ 1__0 }}",
    "{{ 1.5e3 }} {{ 1_0e1_0 }} {{ 3.0 }} {{ 1. }}",
    "{{ a.b[0]['c'].d }}",
    "{{ [1,2,3,][1] }} {{ {'a':1,}.a }}",
    "{{ not not 1 }} {{ not 1 == 2 }} {{ -1 ** 2 }} {{ 2 * -1 }}",
    "{{ 1 if 0 else 2 if 0 else 3 }} {{ (1 if 0 else 2) + 1 }}",
    "{{ 'abc' if 'b' in 'abc' and not 'z' in 'abc' else 'no' }}",
    "{{ 3 > 2 and 2 > 1 or false }} {{ none or none }} {{ 0 and 1 }}",
], x=["a", "b"], t=[[1, 2]], a={"b": [{"c": {"d": "deep"}}]})

# --- printf and format corners ---------------------------------------------------------------
cases("format", [
    "{{ '%d|%i|%u' % (True, 3.99, -2.5) }} {{ '%s|%s' % (none, [1]) }} {{ '%r|%a' % ('é', 'é') }}",
    "{{ '%5s|%-5s|%.1s|%c' % ('ab', 'ab', 'xyz', 10004) }}",
    "{{ '%f|%.0f|%#.0f|%.3e|%10.2f|%-10.2f|%+.1f' % (1.5, 2.5, 2.5, 12345.6789, 3.14159, 3.14159, 2) }}",
    "{{ '%x|%X|%o|%#X|%08.3f|%+05d|% 05d' % (-255, 3054, -8, 255, -3.14159, 42, 42) }}",
    "{{ '%g|%g|%g|%.2g|%#g|%G' % (0.00001234, 123456789, 1.0, 1234.5, 1.0, 1e-10) }}",
    "{{ '%*d|%-*d|%.*f' % (5, 1, 5, 2, 2, 3.14159) }}",
    "{{ '%(a)s %(a)r' % {'a': 'x'} }} {{ '%%' % () }} {{ '100%%' % {} }}",
    "{{ '%s' % (1, 2) }}",
    "{{ '%(missing)s' % {'a': 1} }}",
    "{{ '%z' % 1 }}",
    "{{ '%d' % none }}",
    "{{ '{:d}'.format(42) }} {{ '{:5d}|{:<5d}|{:^5d}|{:+d}|{: d}|{:05d}'.format(1, 2, 3, 4, 5, -6) }}",
    "{{ '{:.2f}|{:10.3f}|{:<10.1f}|{:e}|{:.0e}|{:%}|{:.1%}'.format(3.14159, 2.5, 1.25, 0.000123, 12345, 0.5, 0.1234) }}",
    "{{ '{:g}|{:.3g}|{:G}|{:n}|{}'.format(1e-7, 1234567, 1e20, 1234.5, 0.1) }}",
    "{{ '{:x}|{:X}|{:#x}|{:o}|{:#o}|{:b}|{:08b}|{:,}|{:_}|{:_x}'.format(255, 255, 255, 8, 8, 5, 5, 1234567, 1234567, 65535) }}",
    "{{ '{:*^9}|{:->6}|{:0<4}|{:=+6d}'.format('mid', 'r', 7, 5) }}",
    "{{ '{0}{1}{0}'.format('a', 'b') }} {{ '{a}-{b}'.format(a=1, b=[2]) }} {{ '{0[0]}|{0[k]}'.format({'k': 'v', 0: 'zero'}) }} {{ '{.real}'.format(5) }}",
    "{{ '{} {}'.format(1) }}",
    "{{ '{0} {}'.format(1, 2) }}",
    "{{ '{:d}'.format('x') }}",
    "{{ '{!x}'.format(1) }}",
    "{{ '{'.format() }}",
    "{{ '}'.format() }}",
    "{{ '{:>{w}}'.format('x', w=4) }} {{ '{:.{p}f}'.format(3.14159, p=2) }}",
    "{{ '{}|{:}|{:s}|{:10}|{:.2}'.format('s', 's', 's', 's', 'long') }} {{ '{}'.format(none) }} {{ '{}'.format([1, 'a']) }} {{ '{:5}'.format(true) }} {{ '{}'.format(true) }}",
    "{{ '{:5}'.format(none) }}",
    "{{ '{:.3}'.format(1.0) }} {{ '{:.3}'.format(123456.0) }} {{ '{:.10}'.format(0.1) }} {{ '{:10.3}'.format(-1.5) }} {{ '{}'.format(1e22) }} {{ '{:f}'.format(1e22) }}",
])

# --- Markup interplay -----------------------------------------------------------------------
cases("markup", [
    "{{ ('<b>'|safe) ~ '<i>' }} {{ ('<b>'|safe) + '<i>' }} {{ '<i>' + ('<b>'|safe) }} {{ ('a'|safe) * 2 }}",
    "{{ ('<b>%s</b>'|safe) % '<x>' }} {{ ('<b>{}</b>'|safe).format('<x>') }} {{ ('<a>'|safe)|length }} {{ ('<a>'|safe)|upper }}",
    "{{ ('a b'|safe).split() }} {{ ('  x '|safe).strip() }} {{ ('<p>x</p>'|safe).striptags() }} {{ ('&lt;'|safe).unescape() }}",
    "{{ ['<a>'|safe, '<b>']|join(', ') }} {{ ('<a>'|safe) in '<a>' }} {{ ('<a>'|safe) == '<a>' }} {{ '<a>'|safe is string }}",
    "{% autoescape true %}{{ '<x>' }}{{ '<y>'|safe }}{% endautoescape %}{{ '<z>' }}",
    "{{ '<a href=\"x\">&</a>'|e }} {{ none|e }} {{ 1|e }} {{ \"'\"|e }}",
    "{{ ('a'|safe).replace('a', '<') }} {{ ('-'|safe).join(['<', '>'|safe]) }} {{ ('x'|safe).center(5, '&') }} {{ ('a<b'|safe).partition('<') }}",
])

# --- loops over odd iterables -------------------------------------------------------------------
cases("loop-odd", [
    "{% for a, b in {'x': 1, 'y': 2}.items() %}{{ a }}{{ b }}{% endfor %} {% for k in {'x': 1}.keys() %}{{ k }}{% endfor %} {% for v in {'x': 1}.values() %}{{ v }}{% endfor %}",
    "{% for x in range(3)|reverse %}{{ x }}{% endfor %} {% for x in 'ab'|reverse %}{{ x }}{% endfor %}",
    "{% for x in [3, 1, 2]|sort %}{{ loop.index }}{{ x }}{% endfor %}",
    "{% for x in [1, 2, 3]|select('odd') %}{{ loop.length }}{{ loop.last }}{% endfor %}",
    "{% for x in [1, 2] %}{{ loop.cycle() }}{% endfor %}",
    "{% for i in range(3) %}{{ loop.revindex }}{% if loop.first %}<{% endif %}{% if loop.last %}>{% endif %}{% endfor %}",
    "{% for x in [1, 2, 3] if x > 1 %}{{ loop.index }}:{{ loop.previtem }}:{{ loop.nextitem }} {% else %}none{% endfor %}",
    "{% for x in [[1, 2], [3, 4]] %}{% for y in x %}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}",
    "{% for x in [1] %}{% for y in [2] %}{{ x }}{{ y }}{% endfor %}{% endfor %}",
    "{% for x in ns_list recursive %}{{ x.v }}{% if x.kids %}[{{ loop(x.kids) }}]{% endif %}{% endfor %}",
    "{% for x in [1, 2] %}{{ loop(x) }}{% endfor %}",
], ns_list=[{"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]}])

# --- scoping: Jinja2's compile-time symbol analysis (idtracking) ------------------------------
cases("scope", [
    "{% for i in [1] %}{{ v }}{% set v = 2 %}{{ v }}{% endfor %}{{ v }}",
    "{% for i in [1] %}{% for j in [1] %}{{ v }}{% endfor %}{% set v = 3 %}{% endfor %}",
    "{% for i in [1] %}{{ v }}{% endfor %}{% set v = 3 %}{{ v }}",
    "{{ v }}{% for i in [1] %}{{ v }}{% endfor %}{% set v = 3 %}",
    "{% macro m() %}[{{ v }}]{% endmacro %}{{ m() }}{% set v = 3 %}{{ m() }}",
    "{% for i in [1] %}{% for j in [1] %}{{ v }}{% endfor %}{% if true %}{% set v = 1 %}{% else %}{% set v = 2 %}{% endif %}{% endfor %}",
    "{% for i in [1] %}{% for j in [1] %}{{ v }}{% endfor %}{% if false %}{% set v = 1 %}{% elif true %}{% set v = 5 %}{% endif %}{{ v }}{% endfor %}",
    "{% for i in [1] %}{% macro q() %}{{ v }}{% endmacro %}{{ q() }}{% set v = 3 %}{{ q() }}{% endfor %}",
    "{% for i in [1] %}{% for j in [1] %}{{ w }}{% endfor %}{% set v, w = 1, 2 %}{% endfor %}",
    "{% with %}{% for j in [1] %}{{ v }}{% endfor %}{% set v = 1 %}{% endwith %}{{ v }}",
    "{% for i in [1] %}{% for j in [1] %}{{ v }}{% endfor %}{% macro v() %}{% endmacro %}{% endfor %}",
    "{% for i in [1] %}{% for j in [1] %}{{ range }}{% endfor %}{% set range = 1 %}{% endfor %}",
    "{% set x %}{% set inner = 1 %}{{ inner }}{% endset %}{{ x }}{{ inner }}|",
    "{% filter upper %}{% set inner = 'a' %}{{ inner }}{% endfilter %}{{ inner }}|",
    "{% autoescape false %}{% set inner = 'a' %}{% endautoescape %}{{ inner }}|",
    "{% for i in [1, 2] %}{% if i == 2 %}{{ v }}{% endif %}{% set v = i %}{% endfor %}",
    "{% set ns = namespace(v=0) %}{% for i in [1, 2] %}{% set ns.v = ns.v + i %}{% endfor %}{{ ns.v }}",
    "{% for a in [1] %}{% set b = a %}{% for c in [2] %}{{ b }}{{ c }}{% set b = c %}{{ b }}{% endfor %}{{ b }}{% endfor %}",
    "{% macro m(v) %}{% for i in [1] %}{{ v }}{% endfor %}{% endmacro %}{{ m(7) }}",
    "{% macro m() %}{% for i in [1] %}{{ v }}{% endfor %}{% set v = 8 %}{{ v }}{% endmacro %}{{ m() }}",
    "{% block b %}{{ v }}{% set v = 4 %}{{ v }}{% endblock %}{{ v }}",
    "{% for i in [1] %}{% block b2 %}[{{ i }}]{% endblock %}{% endfor %}",
    "{% for i in [1] %}{% block b3 scoped %}[{{ i }}]{% endblock %}{% endfor %}",
], v=0, w=0)

def main():
    out = sys.stdout
    out.reconfigure(encoding="utf-8")
    seen = {}
    for group, template, context in CASES:
        seen[group] = seen.get(group, 0) + 1
        name = f"{group}-{seen[group]:02d}"
        rec = {"name": name, "template": template, "context": context}
        try:
            rec["text"] = env.from_string(template).render(**context)
            rec["ok"] = True
        except Exception as e:  # record the failure; Go must fail the same way
            rec["ok"] = False
            rec["error"] = f"{type(e).__name__}: {e}"
        out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(f"{len(CASES)} cases, jinja2 {jinja2.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
