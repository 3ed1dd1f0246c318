package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// displayText is s for a terminal line: as it is when every rune is
// printable, otherwise quoted with Go's escapes (strconv.Quote), so that a
// newline, a tab, a terminal escape sequence or invalid UTF-8 in an id or a
// cwd can neither break the table nor reach the terminal. The empty string
// is shown as "".
func displayText(s string) string {
	if s == "" || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}
