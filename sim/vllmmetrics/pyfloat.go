package vllmmetrics

import (
	"math"
	"strconv"
)

// appendSample appends f as prometheus_client's floatToGoString writes a
// sample value or an le bound: "+Inf", "-Inf", "NaN", or Python's repr(f),
// except that a positive repr with more than six digits before the point is
// rewritten as mantissa + "e+0" + exponent. The "e+0" is literal, so 1e10
// comes out as "1e+010"; that is what vLLM serves, so it is kept.
func appendSample(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-Inf"...)
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	}
	var buf [32]byte
	s := appendPyRepr(buf[:0], f)
	dot := -1
	for i, c := range s {
		if c == '.' {
			dot = i
			break
		}
	}
	if f <= 0 || dot <= 6 {
		return append(dst, s...)
	}
	// mantissa = s[0] + "." + s[1:dot] + s[dot+1:], then rstrip("0.").
	start := len(dst)
	dst = append(dst, s[0], '.')
	dst = append(dst, s[1:dot]...)
	dst = append(dst, s[dot+1:]...)
	for len(dst) > start && (dst[len(dst)-1] == '0' || dst[len(dst)-1] == '.') {
		dst = dst[:len(dst)-1]
	}
	dst = append(dst, "e+0"...)
	return strconv.AppendInt(dst, int64(dot-1), 10)
}

// appendPyRepr appends Python's repr of a finite float64: the shortest digits
// that round-trip (as Go's strconv), in fixed notation with at least one
// digit after the point when the decimal exponent is in [-4, 16), else in
// scientific notation with a signed exponent of at least two digits
// (CPython's float_repr_style "short": PyOS_double_to_string(x, 'r', 0,
// Py_DTSF_ADD_DOT_0)).
func appendPyRepr(dst []byte, f float64) []byte {
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // [-]d[.ddd]e±XX
	if e[0] == '-' {
		dst = append(dst, '-')
		e = e[1:]
	}
	ePos := len(e) - 1
	for e[ePos] != 'e' {
		ePos--
	}
	exp := 0 // strconv always writes a sign after the 'e'
	for _, c := range e[ePos+2:] {
		exp = exp*10 + int(c-'0')
	}
	if e[ePos+1] == '-' {
		exp = -exp
	}
	var digits [24]byte
	n := copy(digits[:], e[:1])
	if ePos > 1 { // "d.ddd"
		n += copy(digits[n:], e[2:ePos])
	}
	d := digits[:n]

	if exp < -4 || exp >= 16 {
		dst = append(dst, d[0])
		if len(d) > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}

	point := exp + 1 // digits before the decimal point
	switch {
	case point <= 0:
		dst = append(dst, '0', '.')
		for range -point {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	case point >= len(d):
		dst = append(dst, d...)
		for range point - len(d) {
			dst = append(dst, '0')
		}
		dst = append(dst, '.', '0')
	default:
		dst = append(dst, d[:point]...)
		dst = append(dst, '.')
		dst = append(dst, d[point:]...)
	}
	return dst
}
