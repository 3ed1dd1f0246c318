package session

import (
	"bufio"
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// checkTexts are JSON texts, valid or not, canonical or not, that exercise
// every rule of the canonicalizer.
func checkTexts() []string {
	texts := []string{
		// Scalars and structure.
		`null`, `true`, `false`, `tru`, `nul`, `0`, `-0`, `-0.0`, `-0e3`, `-0E+3`, `0.0`, `-1`, `1.5`, `1E3`, `1e-400`,
		`-1e-400`, `1e400`, `-1e400`, `1e308`, `01`, `1.`, `.5`, `+1`, `-`, `1e`, `1e+`, `123456789012345`,
		`1234567890123456`, `-123456789012345`, `12345678901234567890123`, `9007199254740993`,
		`""`, `"a"`, `"\/"`, `"\u0041"`, `"\u001b"`, `"\u001B"`, `"\u0000"`, `"\u0008"`, `"\u0009"`, `"\u000a"`,
		`"\u000c"`, `"\u000d"`, `"\u001f"`, `"\u0020"`, `"\u007f"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud800"`,
		`"\udc00"`, `"\ud800\ud800"`, `"\ud800x"`, `"\ud800\u0041"`, `"\b\f\n\r\t\"\\"`, `"\x"`, `"\u12"`, `"\u12g4"`,
		"\"tab\there\"", "\"nl\nhere\"", "\"del\x7fhere\"", "\"bad\xffutf8\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"",
		"\"caf\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80\"", "\"trunc\xe2\x80\"", `"unterminated`, `"esc at end\`,
		`"<>&"`, `"0123456789abcdefghij"`, `"quote \" in the middle of a long enough string"`,
		`{}`, `[]`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"a":1}}`, `{"a":{"b":1,"b":2}}`,
		`{"a":[{"b":1},{"b":1}]}`, `{"a":1,}`, `{"a" :1}`, `{"a": 1}`, `{ "a":1}`, `{"a":1 }`, ` {"a":1}`, `{"a":1} `,
		`{"a":1}x`, `{"a":1}{}`, `[1,2,]`, `[1 ,2]`, `[,]`, `{"a"}`, `{1:2}`, `{"a":}`, `[`, `{`, `{"a":[1,{"b":null}]}`,
		"{\"a\":1}\n", "\t[1]", `{"\/":1}`, `{"x\/":1,"x/":2}`,
		// Envelopes.
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"extra":1,"another":2}`,
		`{"type":"turn\/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"turn\u002fend","seq":0,"time":1,"data":{}}`,
		`{"type":"tool/result","seq":9,"time":5,"data":{},"surfaceOp":{"op":"replace","startSeq":2,"endSeq":8},"sourceEventSeqs":[3]}`,
		`{"type":"x","seq":2,"time":5,"data":{},"ignorable":true}`,
		`{"type":"x","seq":-0,"time":5,"data":{}}`,
		`{"type":"x","seq":1e3,"time":5,"data":{}}`,
		`{"type":"x","seq":9007199254740991,"time":9007199254740992,"data":{}}`,
		`{"type":"user/message","seq":0,"time":1,"data":{},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":0,"time":1,"data":{},"surfaceOp":"\u0061ppend"}`,
		`{"type":"user/message","seq":0,"time":1,"data":{},"surfaceOp":"prepend"}`,
		`{"type":"turn/end","seq":3,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}},"surfaceOp":"append"}`,
		`{"type":"","seq":0,"time":1,"data":{}}`,
		`{"type":7,"seq":0,"time":1,"data":{}}`,
		`{"type":"turn/end","seq":0,"time":1,"data":[]}`,
		`{"type":"turn/end","seq":0,"time":1}`,
		`{"seq":0,"time":1,"data":{},"type":"turn/start"}`,
		`{"type":"turn/end","seq":0,"time":1,"data":{},"ignorable":false}`,
		`{"type":"turn/end","seq":0,"time":-1,"data":{}}`,
		`{"type":"turn/end","seq":"0","time":1,"data":{}}`,
	}
	// Integers around the float64 range (1.8e308) and the 15-digit shortcut.
	for _, n := range []int{15, 16, 308, 309, 400} {
		digits := strings.Repeat("9", n)
		texts = append(texts, digits, "-"+digits, `{"n":`+digits+`}`, `[-`+digits+`]`)
	}
	// Objects around the linear/map switch of the duplicate-key check.
	for _, n := range []int{15, 16, 17, 40} {
		var keys, dup []string
		for i := range n {
			keys = append(keys, `"k`+strings.Repeat("x", i)+`":`+strings.Repeat("1", 1+i%3))
		}
		dup = append(append(dup, keys...), keys[n/2])
		texts = append(texts, "{"+strings.Join(keys, ",")+"}", "{"+strings.Join(dup, ",")+"}")
	}
	// Nesting around the depth limit.
	for _, d := range []int{maxJSONDepth - 1, maxJSONDepth, maxJSONDepth + 1} {
		texts = append(texts, strings.Repeat("[", d)+strings.Repeat("]", d), strings.Repeat(`{"a":`, d)+"1"+strings.Repeat("}", d))
	}
	// Long strings with a special byte at every offset of the SWAR words.
	base := strings.Repeat("abcdefgh", 5)
	for i := range len(base) {
		for _, special := range []string{`\n`, `\\`, `\"`, `\/`, `\u001b`, "\x01", "\x7f", "\xc3\xa9", "\xff", `"`} {
			texts = append(texts, `"`+base[:i]+special+base[i:]+`"`, `{"k":"`+base[:i]+special+base[i:]+`"}`)
		}
	}
	return texts
}

// fileLines returns the lines of the repository's sample logs.
func fileLines(t *testing.T) []string {
	t.Helper()
	var lines []string
	for _, path := range []string{"../testdata/sample.jsonl", "../jsonl/testdata/reference-v3.jsonl"} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return lines
}

// mutations returns variants of a text: the text itself, with whitespace
// added, with escapes respelled, truncated, with a byte flipped.
func mutations(text string, rng *rand.Rand) []string {
	out := []string{text, " " + text, text + " ",
		strings.Replace(text, ":", ": ", 1), strings.Replace(text, ",", " ,", 1),
		strings.Replace(text, "/", `\/`, 1), strings.Replace(text, "a", `\u0061`, 1),
		strings.Replace(text, `\u0001`, `\u0001`+`\u001F`, 1), strings.Replace(text, `1`, `-0`, 1),
		strings.Replace(text, `"seq":`, `"seq":-`, 1), strings.Replace(text, `"data":{`, `"data":{"k":1,"k":2,`, 1),
		strings.Replace(text, `"data":{`, `"data":{"n":1e999,`, 1), strings.Replace(text, `"type"`, `"typ\u0065"`, 1),
	}
	for range 4 {
		if len(text) == 0 {
			break
		}
		b := []byte(text)
		b[rng.IntN(len(b))] = byte(rng.IntN(256))
		out = append(out, string(b), text[:rng.IntN(len(text))])
	}
	return out
}

// allCheckTexts is every test text with its mutations.
func allCheckTexts(t *testing.T) []string {
	rng := rand.New(rand.NewPCG(7, 8))
	var all []string
	for _, s := range append(checkTexts(), fileLines(t)...) {
		all = append(all, mutations(s, rng)...)
	}
	return all
}

// isCanonicalJSON reports whether CanonicalJSON(in) would succeed and
// return exactly the bytes of in.
func isCanonicalJSON(in []byte) bool {
	var c canonCheck
	c.reset(in, false)
	return c.run()
}

// hasSurrogateEscape reports whether s holds a \ud800-\udfff escape, which
// the checker leaves to the canonicalizer even where it is canonical.
func hasSurrogateEscape(s []byte) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '\\' && s[i+1] == 'u' && (s[i+2] == 'd' || s[i+2] == 'D') {
			return true
		}
	}
	return false
}

// checkAgainstCanonicalizer fails when canonCheck accepts a text that the
// canonicalizer does not return unchanged, records members that differ
// from the canonicalizer's, or refuses a canonical text it should accept.
func checkAgainstCanonicalizer(t *testing.T, in []byte) {
	t.Helper()
	var c canonCheck
	c.reset(in, true)
	fast := c.run()
	slow := canonicalizer{in: in, out: make([]byte, 0, len(in)), record: true}
	canon, err := slow.run()
	same := err == nil && bytes.Equal(canon, in)
	if fast && !same {
		t.Fatalf("fast path accepted %q, which canonicalizes to %q (%v)", in, canon, err)
	}
	if fast && !reflect.DeepEqual(c.members, slow.members) && (len(c.members) > 0 || len(slow.members) > 0) {
		t.Fatalf("members of %q differ: fast %v, canonicalizer %v", in, c.members, slow.members)
	}
	if same && !fast && !hasSurrogateEscape(in) {
		t.Fatalf("fast path refused canonical text %q", in)
	}
	if fast != isCanonicalJSON(in) {
		t.Fatalf("isCanonicalJSON(%q) disagrees with the checker", in)
	}
	// Whatever the input, its canonical form takes the fast path.
	if err == nil && !hasSurrogateEscape(canon) && !isCanonicalJSON(canon) {
		t.Fatalf("canonical form %q of %q refused by the fast path", canon, in)
	}
}

// TestCanonCheckMatchesCanonicalizer: the checker accepts exactly the texts
// the canonicalizer returns unchanged (lone-surrogate escapes aside, which
// it leaves to the canonicalizer), with the same top-level members.
func TestCanonCheckMatchesCanonicalizer(t *testing.T) {
	for _, s := range allCheckTexts(t) {
		checkAgainstCanonicalizer(t, []byte(s))
	}
}

// sameDecoding fails unless the fast decoder, DecodeEventLine and the
// canonicalizer path give equal events and identical errors for line.
func sameDecoding(t *testing.T, line []byte) {
	t.Helper()
	want, wantErr := decodeEventLineSlow(line, nil)
	var d LineDecoder
	for name, decode := range map[string]func([]byte) (Event, error){"LineDecoder": d.Decode, "DecodeEventLine": DecodeEventLine} {
		got, err := decode(line)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("%s(%q): error %v, canonicalizer path %v", name, line, err, wantErr)
		}
		if err != nil && errors.Is(err, ErrUnparsable) != errors.Is(wantErr, ErrUnparsable) {
			t.Fatalf("%s(%q): ErrUnparsable mismatch", name, line)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s(%q) = %+v, canonicalizer path %+v", name, line, got, want)
		}
	}
}

// TestLineDecoderMatchesCanonicalizerPath: decoding through the fast path
// gives the same events and errors as decoding through the canonicalizer,
// for canonical lines, lines that are valid but not canonical (which must
// take the canonicalizer path) and invalid ones.
func TestLineDecoderMatchesCanonicalizerPath(t *testing.T) {
	for _, s := range allCheckTexts(t) {
		sameDecoding(t, []byte(s))
	}
}

// aliases reports whether b points into buf.
func aliases(b, buf []byte) bool {
	if len(b) == 0 || len(buf) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return p >= lo && p < lo+uintptr(len(buf))
}

// TestLineDecoderPaths: a canonical line is decoded in place (no copy), a
// valid line that is not canonical is decoded into a fresh canonical copy
// with the same result as its canonical spelling, and DecodeEventLine
// never aliases its input.
func TestLineDecoderPaths(t *testing.T) {
	canonical := []byte(`{"type":"user/message","seq":4,"time":9,"data":{"text":"caf` + "\u00e9" + ` \n \u001b"},"surfaceOp":"append"}`)
	spaced := []byte(`{"type":"user\/message", "seq":4,"time":9,"data":{"text":"caf\u00e9 \n \u001B"},"surfaceOp":"append"}`)
	var d LineDecoder
	ev, err := d.Decode(canonical)
	if err != nil {
		t.Fatal(err)
	}
	if !aliases(ev.Data, canonical) || cap(ev.Data) != len(ev.Data) {
		t.Fatalf("canonical line was copied or its data is not capped: %q", ev.Data)
	}
	ev2, err := d.Decode(spaced)
	if err != nil {
		t.Fatal(err)
	}
	if aliases(ev2.Data, spaced) {
		t.Fatal("non-canonical line decoded in place")
	}
	if !reflect.DeepEqual(ev, ev2) {
		t.Fatalf("spellings of one event decode differently: %+v vs %+v", ev, ev2)
	}
	ev3, err := DecodeEventLine(canonical)
	if err != nil {
		t.Fatal(err)
	}
	if aliases(ev3.Data, canonical) {
		t.Fatal("DecodeEventLine aliases its input")
	}
	// Surface operations from one block are distinct values.
	if ev.SurfaceOp == ev2.SurfaceOp || *ev.SurfaceOp != *ev2.SurfaceOp {
		t.Fatalf("surface operations shared or different: %p %p", ev.SurfaceOp, ev2.SurfaceOp)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = d.Decode(canonical) }); n > 0.05 {
		t.Fatalf("decoding a canonical line allocates %.2f times", n)
	}
}

// TestSWARScans: skipPlain and printableASCII agree with the byte table for
// every byte value at every offset of short and long inputs, and on random
// inputs.
func TestSWARScans(t *testing.T) {
	naiveSkip := func(in []byte, i int) int {
		for i < len(in) && plainStringByte[in[i]] {
			i++
		}
		return i
	}
	naivePrintable := func(in []byte) bool {
		for _, b := range in {
			if b < 0x20 || b >= 0x80 {
				return false
			}
		}
		return true
	}
	check := func(in []byte) {
		t.Helper()
		for from := 0; from <= len(in) && from < 9; from++ {
			if got, want := skipPlain(in, from), naiveSkip(in, from); got != want {
				t.Fatalf("skipPlain(%q, %d) = %d, want %d", in, from, got, want)
			}
		}
		if got, want := printableASCII(in), naivePrintable(in); got != want {
			t.Fatalf("printableASCII(%q) = %v, want %v", in, got, want)
		}
	}
	for n := range 41 {
		buf := bytes.Repeat([]byte{'a'}, n)
		check(buf)
		for pos := range n {
			for v := range 256 {
				buf[pos] = byte(v)
				check(buf)
			}
			buf[pos] = 'a'
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		buf := make([]byte, rng.IntN(70))
		for i := range buf {
			if rng.IntN(10) == 0 {
				buf[i] = byte(rng.IntN(256))
			} else {
				buf[i] = byte(0x20 + rng.IntN(0x60))
			}
		}
		check(buf)
	}
}

// FuzzCanonicalFastPath: for any text, the fast path accepts only what the
// canonicalizer returns unchanged, and decoding through it gives the same
// event and error as decoding through the canonicalizer.
func FuzzCanonicalFastPath(f *testing.F) {
	for _, s := range checkTexts() {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"assistant/message","seq":3,"time":1760000000110,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Let me look."}]},"stream":[]},"surfaceOp":"append"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkAgainstCanonicalizer(t, in)
		sameDecoding(t, in)
	})
}
