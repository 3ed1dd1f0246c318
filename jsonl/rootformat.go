package jsonl

import (
	"fmt"

	"github.com/sessionflow/sessionflow/wire"
)

// Format selects the log format a root writes. The default, FormatV3, is
// sessionflow's own format; FormatV0 is the format of the published DeepSeek
// Harness, for a root that sessionflow and the harness share.
type Format string

// Formats a root can write.
const (
	// FormatV3 writes session.v3.jsonl[.zstd] and migrates a v0 session to
	// it on its first write open.
	FormatV3 Format = "v3"
	// FormatV0 writes session.jsonl[.zstd] with the v0 header (the inherited
	// count as seedLength), and writes to v0 sessions in place instead of
	// migrating them, so the harness keeps reading and resuming every
	// session of the root. A session already in format v3 stays v3.
	FormatV0 Format = "v0"
)

// ParseFormat accepts "v3" and "v0" ("" is v3).
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", FormatV3:
		return FormatV3, nil
	case FormatV0:
		return FormatV0, nil
	}
	return "", fmt.Errorf("unknown log format %q (want \"v3\" or \"v0\")", s)
}

// Format is the format this store writes new sessions in.
func (s *Store) Format() Format {
	if s.format == "" {
		return FormatV3
	}
	return s.format
}

// rootHeader is the header a new session is written with in this root: in a
// v0 root, version 0 with the inherited count as SeedLength.
func (s *Store) rootHeader(h wire.Header, inherited int64) wire.Header {
	if s.Format() != FormatV0 {
		return h
	}
	h.Version = wire.FormatVersionV0
	h.SeedLength = 0
	if h.IsSeeded {
		h.SeedLength = inherited
	}
	return h
}

// generationFor is the generation file name a header is written to.
func (s *Store) generationFor(h wire.Header) string {
	if h.Version == wire.FormatVersionV0 {
		return generationFile(wire.FormatVersionV0, s.comp)
	}
	return s.generationName()
}

// encodeHeaderFor renders a header line in the format of its version.
func encodeHeaderFor(h wire.Header) ([]byte, error) {
	if h.Version == wire.FormatVersionV0 {
		return encodeHeaderLineV0(h, h.SeedLength)
	}
	return encodeHeaderLine(h)
}

// refuseMaterialize is the refusal of a first write over a log that already
// exists. A v0 session uses the published harness's wording, so that both
// report the same race on a shared root.
func refuseMaterialize(id, path string, version int) *wire.StoreError {
	hint := "open it instead"
	if version == wire.FormatVersionV0 {
		hint = "load/resume it instead"
	}
	return &wire.StoreError{Code: CodeAlreadyExists, SessionID: id, Path: path, Message: fmt.Sprintf(
		"refusing to materialize %q: a log already exists on disk (%s)", id, hint)}
}
