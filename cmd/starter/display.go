package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Untrusted text (ids, cwds, a model's answer, tool names and output,
// provider and workflow errors) never reaches the terminal raw: a terminal
// acts on control characters and escape sequences instead of showing them
// (ESC ] 0 ; … BEL retitles the window, ESC [ 2 J clears the screen, a
// carriage return or U+202E rewrites what the line seems to say). Every
// line the starter prints of such text goes through this file's one rule,
// unsafeRune, in one of two forms (docs/API.md "Terminal output",
// docs/DECISIONS.md D74):
// displayText quotes a name (an id, a cwd, a tool name) that holds anything
// but printable runes, and termText escapes the unsafe runes of prose in
// place.

// unsafeRune reports whether r may act on a terminal instead of showing:
// the C0 and C1 control characters and DEL (unicode.IsControl: ESC, BEL,
// CR, backspace, CSI U+009B, ...) and the bidirectional formatting
// characters (unicode.Bidi_Control: U+202A..U+202E, U+2066..U+2069, U+200E,
// U+200F, U+061C).
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// displayText is s for a terminal line: as it is when every rune is
// printable, otherwise quoted with Go's escapes (strconv.Quote), so that a
// newline, a tab, a terminal escape sequence or invalid UTF-8 in an id or a
// cwd can neither break the table nor reach the terminal (every unsafeRune
// is not printable). The empty string is shown as "".
func displayText(s string) string {
	if s == "" || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// termText is prose for the terminal: s with every unsafe rune (unsafeRune)
// and every byte of invalid UTF-8 written as its Go escape (\x1b, \a, \r,
// \u202e, \x9b, \xff), so that it shows as text and acts on nothing. With
// lines set (a model's answer, printed as it is meant to be read) newlines
// and tabs are kept; without it (a one-line message, an error) they are
// escaped too, so the text stays on its line. A carriage return is always
// escaped: it would let the rest of a line overwrite its start.
func termText(s string, lines bool) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (unsafeRune(r) && !(lines && (r == '\n' || r == '\t'))) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case lines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unsafeRune(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}

// errorText is an error's message for the terminal, on one line
// (termText).
func errorText(err error) string { return termText(err.Error(), false) }

// termJSON is one line of JSON output made safe for a terminal: the unsafe
// runes encoding/json leaves raw inside strings (DEL, the C1 controls, the
// bidirectional formatting characters; it escapes the C0 ones itself) are
// written as \u escapes, which decode to the same text.
func termJSON(b []byte) []byte {
	if !strings.ContainsFunc(string(b), unsafeRune) {
		return b
	}
	var out []byte
	for _, r := range string(b) {
		if unsafeRune(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	return out
}
