package template

import (
	"strconv"
	"strings"
	"time"
)

// strftime formats t as Python's datetime.now().strftime(format) does on
// glibc in the C locale: a naive datetime, so %z and %Z are empty; %f is
// microseconds; the glibc flags "-", "_", "0" and "^" are honoured (Llama 3
// templates use "%-d"). Unknown directives are copied through, as glibc does.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		start := i
		i++
		flag := byte(0)
		if strings.IndexByte("-_0^#", format[i]) >= 0 && i+1 < len(format) {
			flag = format[i]
			i++
		}
		s, ok := strftimeOne(t, format[i], flag)
		if !ok {
			b.WriteString(format[start : i+1])
			continue
		}
		b.WriteString(s)
	}
	return b.String()
}

var (
	weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	months   = []string{"January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December"}
)

func num(n, width int, pad byte, flag byte) string {
	switch flag {
	case '-':
		return strconv.Itoa(n)
	case '_':
		pad = ' '
	case '0':
		pad = '0'
	}
	s := strconv.Itoa(n)
	for len(s) < width {
		s = string(pad) + s
	}
	return s
}

func strftimeOne(t time.Time, c, flag byte) (string, bool) {
	hour12 := t.Hour() % 12
	if hour12 == 0 {
		hour12 = 12
	}
	upper := func(s string) string {
		if flag == '^' || flag == '#' {
			return strings.ToUpper(s)
		}
		return s
	}
	isoYear, isoWeek := t.ISOWeek()
	switch c {
	case 'a':
		return upper(weekdays[t.Weekday()][:3]), true
	case 'A':
		return upper(weekdays[t.Weekday()]), true
	case 'b', 'h':
		return upper(months[t.Month()-1][:3]), true
	case 'B':
		return upper(months[t.Month()-1]), true
	case 'c':
		return strftime(t, "%a %b %e %H:%M:%S %Y"), true
	case 'C':
		return num(t.Year()/100, 2, '0', flag), true
	case 'd':
		return num(t.Day(), 2, '0', flag), true
	case 'D', 'x':
		return strftime(t, "%m/%d/%y"), true
	case 'e':
		return num(t.Day(), 2, ' ', flag), true
	case 'f':
		return num(t.Nanosecond()/1000, 6, '0', flag), true
	case 'F':
		return strftime(t, "%Y-%m-%d"), true
	case 'g':
		return num(isoYear%100, 2, '0', flag), true
	case 'G':
		return num(isoYear, 1, '0', flag), true
	case 'H':
		return num(t.Hour(), 2, '0', flag), true
	case 'I':
		return num(hour12, 2, '0', flag), true
	case 'j':
		return num(t.YearDay(), 3, '0', flag), true
	case 'k':
		return num(t.Hour(), 2, ' ', flag), true
	case 'l':
		return num(hour12, 2, ' ', flag), true
	case 'm':
		return num(int(t.Month()), 2, '0', flag), true
	case 'M':
		return num(t.Minute(), 2, '0', flag), true
	case 'n':
		return "\n", true
	case 'p':
		if t.Hour() < 12 {
			return "AM", true
		}
		return "PM", true
	case 'P':
		if t.Hour() < 12 {
			return "am", true
		}
		return "pm", true
	case 'r':
		return strftime(t, "%I:%M:%S %p"), true
	case 'R':
		return strftime(t, "%H:%M"), true
	case 's':
		return strconv.FormatInt(t.Unix(), 10), true
	case 'S':
		return num(t.Second(), 2, '0', flag), true
	case 't':
		return "\t", true
	case 'T', 'X':
		return strftime(t, "%H:%M:%S"), true
	case 'u':
		wd := int(t.Weekday())
		if wd == 0 {
			wd = 7
		}
		return strconv.Itoa(wd), true
	case 'U':
		return num((t.YearDay()+6-int(t.Weekday()))/7, 2, '0', flag), true
	case 'V':
		return num(isoWeek, 2, '0', flag), true
	case 'w':
		return strconv.Itoa(int(t.Weekday())), true
	case 'W':
		return num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2, '0', flag), true
	case 'y':
		return num(t.Year()%100, 2, '0', flag), true
	case 'Y':
		return num(t.Year(), 1, '0', flag), true
	case 'z', 'Z':
		return "", true
	case '%':
		return "%", true
	}
	return "", false
}
