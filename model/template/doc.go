// Package template renders Hugging Face chat templates in pure Go with the
// semantics of Python Jinja2 3.1 as transformers configures it for
// apply_chat_template, which is what vLLM renders chat requests with:
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
// extensions=[loopcontrols]), tojson = json.dumps(ensure_ascii=False), and
// the globals raise_exception and strftime_now.
//
// It owns the template language: lexing and parsing (Compile), a small
// Python value model (None, bool, int, float, str, list, tuple, dict with
// insertion order, Undefined), Python's printing rules (str and repr of
// floats, strings and containers), Python string methods with their
// arguments, the Jinja2 filters and tests, and a JSON decoder (ParseJSON)
// that keeps key order and int/float distinctions the way json.loads does.
// Chat reads chat_template and the special tokens from tokenizer_config.json.
//
// template starts no goroutines, does no I/O and reads no clock: the time
// strftime_now prints is passed in. Its only package-level state is
// immutable tables (filters, tests, globals, Unicode casing exceptions). A
// compiled Template is immutable and safe for concurrent Render calls; every
// render is bounded by Limits (output size, steps, nesting depth), so
// hostile templates cannot hang or exhaust memory.
package template
