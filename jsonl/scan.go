package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/sessionflow/sessionflow/session"
)

// Zstandard-specific corruption texts (SPEC 4.4).
var (
	errZstdHeaderless    = errors.New("empty or header-less Zstandard session log")
	errZstdHeaderFrame   = errors.New("corrupt Zstandard session log: first frame is not exactly one header line")
	errZstdHeaderInvalid = errors.New("corrupt Zstandard session log: header frame failed validation")
	errZstdTornRecord    = errors.New("corrupt Zstandard session log: complete frame contains a torn JSONL record")
)

// scanResult is a validated physical log (SPEC 4.3, 4.4).
type scanResult struct {
	header session.Header
	// events is the valid contiguous prefix (complete frames only, in zstd).
	events []session.Event
	// committedBytes ends the last valid record (raw) or complete frame (zstd).
	committedBytes int64
	// tornTruncateTo is the offset a write handle cuts the file to before its
	// first mutation, or -1 when the file has no damaged suffix.
	tornTruncateTo int64
	// recovered holds the complete valid records of a torn final zstd frame;
	// the write path re-writes them as a fresh frame after truncating.
	recovered []session.Event
	// size is the physical size of the scanned bytes.
	size int64
}

// lineScanner is the incremental event-line scanner of SPEC 4.3.
type lineScanner struct {
	strict bool
	line   int64
	events []session.Event
	issue  error
}

// feed scans the complete lines of buf and returns the number of bytes
// consumed by valid records (a prefix of buf). It returns an error when the
// log must be refused as corrupt; in strict mode any bad record is fatal.
//
// Lines are decoded first, in parallel for large inputs, and the rules of
// SPEC 4.3 are then applied in order over the decoded lines.
func (s *lineScanner) feed(buf []byte) (int64, error) {
	ends := lineEnds(buf)
	decoded := decodeLines(buf, ends)
	var committed int64
	for i, end := range ends {
		s.line++
		ev, err := decoded[i].ev, decoded[i].err
		if errors.Is(err, session.ErrUnparsable) {
			if s.issue == nil {
				s.issue = fmt.Errorf("corrupt session log: unparsable committed event at line %d", s.line)
			}
			if s.strict {
				return committed, s.issue
			}
			continue
		}
		isTurnEnd := ev.Type == session.TypeTurnEnd
		if s.issue != nil {
			if isTurnEnd {
				return committed, s.issue
			}
			continue
		}
		if err == nil {
			if want := int64(len(s.events)); ev.Seq != want {
				err = fmt.Errorf("seq gap (expected %d, got %d)", want, ev.Seq)
			}
		}
		if err != nil {
			s.issue = fmt.Errorf("corrupt session log: invalid committed event at line %d: %w", s.line, err)
			if isTurnEnd || s.strict {
				return committed, s.issue
			}
			continue
		}
		s.events = append(s.events, ev)
		committed = int64(end + 1)
	}
	return committed, nil
}

// lineEnds returns the offsets of the '\n' of every complete line of buf.
func lineEnds(buf []byte) []int {
	ends := make([]int, 0, len(buf)/256+1)
	for pos := 0; ; {
		nl := bytes.IndexByte(buf[pos:], '\n')
		if nl < 0 {
			return ends
		}
		pos += nl
		ends = append(ends, pos)
		pos++
	}
}

// decodedLine is one line's decoding.
type decodedLine struct {
	ev  session.Event
	err error
}

// parallelDecodeLines is the line count from which decoding is spread over
// the available CPUs.
const parallelDecodeLines = 4096

// decodeLines decodes every complete line of buf (ends as from lineEnds).
func decodeLines(buf []byte, ends []int) []decodedLine {
	out := make([]decodedLine, len(ends))
	decode := func(lo, hi int) {
		start := 0
		if lo > 0 {
			start = ends[lo-1] + 1
		}
		for i := lo; i < hi; i++ {
			out[i].ev, out[i].err = session.DecodeEventLine(buf[start:ends[i]])
			start = ends[i] + 1
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if len(ends) < parallelDecodeLines || workers < 2 {
		decode(0, len(ends))
		return out
	}
	var wg sync.WaitGroup
	chunk := (len(ends) + workers - 1) / workers
	for lo := 0; lo < len(ends); lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			decode(lo, hi)
		}(lo, min(lo+chunk, len(ends)))
	}
	wg.Wait()
	return out
}

// scanRaw validates a raw JSONL log (SPEC 4.1, 4.3).
func scanRaw(data []byte) (*scanResult, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return nil, errHeaderless
	}
	h, err := parseHeaderLine(data[:nl])
	if err != nil {
		return nil, err
	}
	base := int64(nl + 1)
	sc := lineScanner{}
	n, err := sc.feed(data[base:])
	if err != nil {
		return nil, err
	}
	r := &scanResult{header: h, events: sc.events, committedBytes: base + n, tornTruncateTo: -1, size: int64(len(data))}
	if r.committedBytes < r.size {
		r.tornTruncateTo = r.committedBytes
	}
	return r, nil
}

// scanZstd validates a Zstandard log (SPEC 4.4).
func scanZstd(codec *zstdCodec, data []byte) (*scanResult, error) {
	frames, tornStart, err := scanZstdFrames(data)
	if err != nil {
		return nil, err
	}
	if len(frames) == 0 {
		return nil, errZstdHeaderless
	}
	headerPlain, err := codec.decodeFrame(data[frames[0].start:frames[0].end])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errZstdHeaderInvalid, err)
	}
	h, err := parseHeaderFrame(headerPlain)
	if err != nil {
		return nil, err
	}
	// Every batch frame holds whole lines, so the frames' plaintexts are
	// concatenated and scanned in one pass (decoded in parallel when large).
	plain := make([]byte, 0, plaintextSize(data, frames[1:]))
	for _, f := range frames[1:] {
		n := len(plain)
		plain, err = codec.appendDecodedFrame(plain, data[f.start:f.end])
		if err != nil {
			return nil, fmt.Errorf("corrupt Zstandard session log: frame at byte %d failed validation: %w", f.start, err)
		}
		if len(plain) > n && plain[len(plain)-1] != '\n' {
			return nil, errZstdTornRecord
		}
	}
	sc := lineScanner{strict: true}
	n, err := sc.feed(plain)
	if err != nil {
		return nil, err
	}
	if n != int64(len(plain)) {
		return nil, errZstdTornRecord
	}
	r := &scanResult{header: h, events: sc.events, committedBytes: frames[len(frames)-1].end, tornTruncateTo: -1, size: int64(len(data))}
	if tornStart >= 0 {
		r.tornTruncateTo = tornStart
		if partial := codec.recoverTornFrame(data[tornStart:]); len(partial) > 0 {
			tail := lineScanner{line: sc.line, events: sc.events}
			if _, err := tail.feed(partial); err == nil {
				r.recovered = tail.events[len(sc.events):len(tail.events):len(tail.events)]
			}
		}
	}
	return r, nil
}

// parseHeaderFrame checks that a header frame's plaintext is exactly one
// newline-terminated line and parses it.
func parseHeaderFrame(plain []byte) (session.Header, error) {
	if len(plain) == 0 || bytes.IndexByte(plain, '\n') != len(plain)-1 {
		return session.Header{}, errZstdHeaderFrame
	}
	return parseHeaderLine(plain[:len(plain)-1])
}

// plaintextSize is the total content size the frames declare (frames this
// store writes always declare it), bounded by zstdMaxFrameContent each, so
// the plaintext is allocated once.
func plaintextSize(data []byte, frames []frameSpan) int {
	total := 0
	for _, f := range frames {
		h, complete, err := parseZstdFrameHeader(data[f.start:f.end], 0)
		if err != nil || !complete || !h.hasContentSize || h.contentSize > zstdMaxFrameContent {
			return total + 4*int(f.end-f.start)
		}
		total += int(h.contentSize)
	}
	return total
}
