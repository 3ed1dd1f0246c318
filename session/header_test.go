package session

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHeaderValidate(t *testing.T) {
	ok := Header{Version: FormatVersion, ID: "sess-1", CreatedAt: 1700000000000, Cwd: "/work", ParentSession: "p",
		IsSeeded: true, Origin: OriginSubagent, DelegationDepth: 2, AgentPreset: "coder"}
	assert.NoError(t, ok.Validate())
	assert.NoError(t, Header{ID: "x"}.Validate())
	for _, cwd := range []string{`C:\work`, `c:/work`, `\\server\share`} {
		h := ok
		h.Cwd = cwd
		assert.NoError(t, h.Validate(), cwd)
	}

	cases := []struct {
		mut  func(*Header)
		want string
	}{
		{func(h *Header) { h.ID = "" }, "cannot encode an empty path segment"},
		{func(h *Header) { h.ID = "a\xffb" }, `session id must be valid UTF-8, got "a\xffb"`},
		{func(h *Header) { h.CreatedAt = -1 }, "session metadata createdAt must be a non-negative safe integer"},
		{func(h *Header) { h.CreatedAt = MaxSafeInteger + 1 }, "session metadata createdAt must be a non-negative safe integer"},
		{func(h *Header) { h.DelegationDepth = -1 }, "session header delegationDepth must be a non-negative safe integer"},
		{func(h *Header) { h.Cwd = "relative/dir" }, `session header cwd must be an absolute path, got "relative/dir"`},
		{func(h *Header) { h.Origin = "user" }, `session header origin must be "subagent", got "user"`},
		{func(h *Header) { h.ParentSession = "\xff" }, "session header parentSession must be valid UTF-8"},
		{func(h *Header) { h.AgentPreset = "\xff"; h.Cwd = "/\xff" }, "session header cwd must be valid UTF-8"},
	}
	for _, c := range cases {
		h := ok
		c.mut(&h)
		assert.EqualError(t, h.Validate(), c.want)
	}
	assert.True(t, errors.Is(Header{ID: "a\xff"}.Validate(), ErrInvalidUTF8ID))
	assert.ErrorIs(t, Header{ID: "x", CreatedAt: -1}.Validate(), ErrCreatedAt)
	assert.ErrorIs(t, Header{}.Validate(), ErrEmptyID)
}

func TestHeaderValidateInheritedCount(t *testing.T) {
	seeded := Header{ID: "x", IsSeeded: true}
	unseeded := Header{ID: "x"}
	assert.NoError(t, seeded.ValidateInheritedCount(0))
	assert.NoError(t, seeded.ValidateInheritedCount(12))
	assert.NoError(t, unseeded.ValidateInheritedCount(0))
	assert.NoError(t, unseeded.ValidateInheritedCount(-1))
	assert.EqualError(t, seeded.ValidateInheritedCount(-1), "seeded session header requires an inherited event count")
	assert.ErrorIs(t, seeded.ValidateInheritedCount(-1), ErrSeededWithoutCount)
	assert.EqualError(t, unseeded.ValidateInheritedCount(3), "unseeded session header inherited event count must be 0")
	assert.ErrorIs(t, unseeded.ValidateInheritedCount(3), ErrUnseededWithCount)
	assert.Error(t, seeded.ValidateInheritedCount(MaxSafeInteger+1))
}
