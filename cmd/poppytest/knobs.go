package main

// This file is the table of options: the strictness and misbehaviour of a
// run's Company that poppytest.Options decides when the Company starts. A
// run takes them when it is created or reset (POST /admin/runs,
// POST /admin/runs/{run}/reset, or --option for the default run). Adding
// one is one line here; the admin API's OpenAPI document and GET
// /admin/knobs follow from the table.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// knobType is the JSON type of an option or a fault's parameter.
type knobType string

const (
	typeBool     knobType = "boolean"
	typeInt      knobType = "integer"
	typeString   knobType = "string"
	typeDuration knobType = "duration" // a string such as "1.5s" or "200ms"
	typeObject   knobType = "object"
)

// schema is the JSON Schema of a value of the type.
func (t knobType) schema() map[string]any {
	switch t {
	case typeDuration:
		return map[string]any{"type": "string", "pattern": durationPattern, "examples": []any{"2s", "250ms"},
			"description": "a duration: a decimal number with a unit of ns, us, ms, s, m or h"}
	case typeObject:
		return map[string]any{"type": "object"}
	}
	return map[string]any{"type": string(t)}
}

// durationPattern is the syntax time.ParseDuration takes, without a sign.
const durationPattern = `^([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`

// option is one field of poppytest.Options a run can set.
type option struct {
	name  string
	typ   knobType
	doc   string
	set   func(o *poppytest.Options, v json.RawMessage) error
	extra map[string]any // more of the value's JSON Schema, for an object
}

// options are every option a run can set. Keep them in the order of
// poppytest.Options.
var options = []option{
	stringOption("cache_control", "Cache-Control of the discovery documents. Default max-age=300.", func(o *poppytest.Options) *string { return &o.CacheControl }),
	stringOption("document_content_type", "Content-Type of the discovery documents, such as text/plain. Default application/json.", func(o *poppytest.Options) *string { return &o.DocumentContentType }),
	intOption("mcp_page_size", "The most tools one tools/list page of the MCP server holds. Default 2.", func(o *poppytest.Options) *int { return &o.MCPPageSize }),
	boolOption("no_nonce", "Turn DPoP nonces off. Default: every proof must carry the host's current nonce (§4.3).", func(o *poppytest.Options) *bool { return &o.NoNonce }),
	durationOption("token_lifetime", "Lifetime of the Session Tokens issued. Default 1h.", func(o *poppytest.Options) *time.Duration { return &o.TokenLifetime }),
	durationOption("agent_delay", "How long the Company Agent takes to reply. Default 50ms.", func(o *poppytest.Options) *time.Duration { return &o.AgentDelay }),
	boolOption("no_humans", "A handoff finds no one (§7.9). Default: it waits until a person joins through the admin API.", func(o *poppytest.Options) *bool { return &o.NoHumans }),
	intOption("event_page_size", "The most events one read returns; a fuller page sets has_more (§7.5). Default 100.", func(o *poppytest.Options) *int { return &o.EventPageSize }),
	durationOption("stream_lifetime", "End each event stream cleanly after this long (§7.6). Default: streams last.", func(o *poppytest.Options) *time.Duration { return &o.StreamLifetime }),
	intOption("replay_events", "How many already-read events a read returns again before new ones (§7.5). Default 1; negative: none.", func(o *poppytest.Options) *int { return &o.ReplayEvents }),
	boolOption("endless_has_more", "Hostile: every read adds a message and answers has_more true, forever (§7.5).", func(o *poppytest.Options) *bool { return &o.EndlessHasMore }),
	stringOption("agent_role", "The role given to the agent's own messages in events (§7.5). Default personal_agent.", func(o *poppytest.Options) *string { return &o.AgentRole }),
	durationOption("device_interval", "The interval of Device Sign-In, in whole seconds (RFC 8628 §3.2). Default 5s.", func(o *poppytest.Options) *time.Duration { return &o.DeviceInterval }),
	{name: "auto_approve", typ: typeObject, doc: "Approve every device sign-in without a person, for account, after a delay.",
		set: setAutoApprove, extra: map[string]any{"required": []any{"account"}, "additionalProperties": false,
			"properties": map[string]any{"account": map[string]any{"type": "string"}, "after": typeDuration.schema()}}},
	intOption("mediated_attempts", "Wrong codes or credentials Mediated Sign-In takes (§4.7). Default 3.", func(o *poppytest.Options) *int { return &o.MediatedAttempts }),
	{name: "mediated_http_status", typ: typeObject, doc: `HTTP status of Mediated Sign-In answers by what their body says, such as {"code_required": 202}.`,
		set: setMediatedStatus, extra: map[string]any{"additionalProperties": map[string]any{"type": "integer", "minimum": 100, "maximum": 599}}},
	intOption("mediated_redirect", "Hostile: answer every Mediated Sign-In post with this redirect (307 or 308) to another path; following it is the agent's violation of §4.7. Default: none.", func(o *poppytest.Options) *int { return &o.MediatedRedirect }),
	boolOption("no_account_tokens", "Sign-ins issue no Account Token, breaking §4.4.", func(o *poppytest.Options) *bool { return &o.NoAccountTokens }),
	boolOption("rotate_refresh_tokens", "Each refresh_token grant returns a new Account Token; the old one is refused (§4.8).", func(o *poppytest.Options) *bool { return &o.RotateRefreshTokens }),
	boolOption("end_sessions_on_sign_out", "Sign-out ends the Sessions instead of signing them out (§4.9).", func(o *poppytest.Options) *bool { return &o.EndSessionsOnSignOut }),
	durationOption("account_token_lifetime", "Lifetime of the Account Tokens issued. Default: they do not expire.", func(o *poppytest.Options) *time.Duration { return &o.AccountTokenLifetime }),
	{name: "other_domains", typ: typeObject, doc: "More domains of the Company under its one issuer (§3.2), such as example.co.uk.", extra: map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		set: func(o *poppytest.Options, v json.RawMessage) error { return strictJSON(v, &o.OtherDomains) }},
	{name: "flaws", typ: typeObject, doc: "Break Company-side rules one at a time (poppytest.Flaws by JSON name, such as {\"any_nonce\": true}), for tools that check Companies.",
		set: func(o *poppytest.Options, v json.RawMessage) error { return strictJSON(v, &o.Flaws) }},
	stringOption("openapi_resource", "Give the store API this resource (§4.3 Narrower tokens): it then takes only tokens issued for it.", func(o *poppytest.Options) *string { return &o.OpenAPIResource }),
}

func boolOption(name, doc string, field func(*poppytest.Options) *bool) option {
	return option{name: name, typ: typeBool, doc: doc, set: func(o *poppytest.Options, v json.RawMessage) error {
		return strictJSON(v, field(o))
	}}
}

func intOption(name, doc string, field func(*poppytest.Options) *int) option {
	return option{name: name, typ: typeInt, doc: doc, set: func(o *poppytest.Options, v json.RawMessage) error {
		return strictJSON(v, field(o))
	}}
}

func stringOption(name, doc string, field func(*poppytest.Options) *string) option {
	return option{name: name, typ: typeString, doc: doc, set: func(o *poppytest.Options, v json.RawMessage) error {
		return strictJSON(v, field(o))
	}}
}

func durationOption(name, doc string, field func(*poppytest.Options) *time.Duration) option {
	return option{name: name, typ: typeDuration, doc: doc, set: func(o *poppytest.Options, v json.RawMessage) error {
		d, err := parseDuration(v)
		*field(o) = d
		return err
	}}
}

func setAutoApprove(o *poppytest.Options, v json.RawMessage) error {
	var a struct {
		Account string          `json:"account"`
		After   json.RawMessage `json:"after"`
	}
	if err := strictJSON(v, &a); err != nil || a.Account == "" {
		return fmt.Errorf(`want {"account": "acct_dana", "after": "2s"}`)
	}
	after := time.Duration(0)
	if a.After != nil {
		var err error
		if after, err = parseDuration(a.After); err != nil {
			return fmt.Errorf("after: %w", err)
		}
	}
	o.AutoApprove = &poppytest.AutoApproval{Account: a.Account, After: after}
	return nil
}

func setMediatedStatus(o *poppytest.Options, v json.RawMessage) error {
	var m map[string]int
	if err := strictJSON(v, &m); err != nil {
		return err
	}
	for k, status := range m {
		if status < 100 || status > 599 {
			return fmt.Errorf("%s: status %d is not 100 to 599", k, status)
		}
	}
	o.MediatedHTTPStatus = m
	return nil
}

// strictJSON decodes v into p, refusing unknown fields and trailing data.
func strictJSON(v json.RawMessage, p any) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

// parseDuration reads a JSON string such as "1.5s" as a duration.
func parseDuration(v json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return 0, fmt.Errorf(`want a duration such as "2s" or "250ms"`)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf(`%q is not a duration such as "2s" or "250ms"`, s)
	}
	return d, nil
}

// lookupOption returns the option named name.
func lookupOption(name string) (option, bool) {
	for _, o := range options {
		if o.name == name {
			return o, true
		}
	}
	return option{}, false
}

// applyOptions sets every option of set on o, or says which is wrong.
func applyOptions(o *poppytest.Options, set map[string]json.RawMessage) error {
	for name, v := range set {
		opt, ok := lookupOption(name)
		if !ok {
			return fmt.Errorf("no option %q (GET /admin/knobs lists them)", name)
		}
		if err := opt.set(o, v); err != nil {
			return fmt.Errorf("option %s: %w", name, err)
		}
	}
	return nil
}

// parseOptionFlag reads --option NAME=VALUE, VALUE being JSON or, for a
// string or duration, plain text.
func parseOptionFlag(arg string, into map[string]json.RawMessage) error {
	name, value, ok := strings.Cut(arg, "=")
	opt, known := lookupOption(name)
	if !ok || !known {
		return fmt.Errorf("--option %q: want NAME=VALUE with NAME one of %s", arg, optionNames())
	}
	raw := json.RawMessage(value)
	if (opt.typ == typeString || opt.typ == typeDuration) && !json.Valid(raw) {
		raw, _ = json.Marshal(value)
	}
	if err := opt.set(&poppytest.Options{}, raw); err != nil {
		return fmt.Errorf("--option %s: %w", name, err)
	}
	into[name] = raw
	return nil
}

func optionNames() string {
	names := make([]string, len(options))
	for i, o := range options {
		names[i] = o.name
	}
	return strings.Join(names, ", ")
}
