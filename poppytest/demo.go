package poppytest

// This file is what a demo Company adds for a person trying it, where no
// test drives the Company's side: a person of the Company who joins every
// handoff by itself (Options.HumanJoins), and an inbox page showing the
// one-time codes Mediated Sign-In sent (InboxHandler), as the User's phone
// or mailbox would. Tests drive a Person and read codes with LastCode.

import (
	"cmp"
	"html/template"
	"net/http"
	"time"
)

// HumanJoin has a person of the Company join every handoff (Poppy 0.1 §7.9)
// by itself, for demos: After past the handoff, if the conversation is still
// queued, they join (responder human, status idle) and say Greeting; then,
// while a person is in the conversation, each message of the Personal Agent
// gets Reply from them after Options.AgentDelay. The zero value joins after
// five seconds with the default texts.
type HumanJoin struct {
	After    time.Duration // zero: 5 s; negative: at once
	Greeting string        // zero: a greeting from Alex, a person of the demo Company
	Reply    string        // zero: a reply saying Alex is the demo's stand-in
}

const (
	defaultJoinAfter = 5 * time.Second
	defaultGreeting  = "Hi, I'm Alex, a person on Example Company's team. I can see this conversation: how can I help?"
	defaultReply     = "Thanks, I have noted that. (I am the demo Company's stand-in person and answer every message this way; " +
		"close this conversation and start another to talk with the Company Agent again.)"
)

// joinLater has a person join the queued conversation cv after
// Options.HumanJoins' delay; nothing without it. The caller holds st.mu.
func (s *Server) joinLater(cv *convRecord) {
	h := s.opts.HumanJoins
	if h == nil {
		return
	}
	after := h.After
	if after == 0 {
		after = defaultJoinAfter
	}
	s.afterFunc(cv, max(after, 0), func() {
		if cv.Status != StatusQueued {
			return // answered meanwhile: a test's Person joined, or the handoff ended
		}
		cv.gen++ // as Person.Join: the Company Agent's turns in flight are dropped
		cv.turns = 0
		// Poppy 0.1 §7.9: "When a person joins, responder becomes human."
		s.setState(cv, StatusIdle, ResponderHuman)
		s.addCompanyMessage(cv, ResponderHuman, cmp.Or(h.Greeting, defaultGreeting), nil)
	})
}

// personReplies has the person in cv answer a message of the Personal
// Agent, with Options.HumanJoins; nothing without it. The caller holds st.mu.
func (s *Server) personReplies(cv *convRecord) {
	h := s.opts.HumanJoins
	if h == nil || cv.Responder != ResponderHuman || cv.Status == StatusQueued {
		return
	}
	s.afterDelay(cv, func() {
		if cv.Responder == ResponderHuman && cv.Status != StatusClosed {
			// Poppy 0.1 §7.7: "Each Company message MUST also include sender, with agent or human"
			s.addCompanyMessage(cv, ResponderHuman, cmp.Or(h.Reply, defaultReply), nil)
		}
	})
}

// inboxEntry is one code on the inbox page.
type inboxEntry struct {
	Sent    time.Time
	Email   string
	SentTo  string
	Code    string
	Expires time.Time
	State   string // "waiting", "finished" or "expired"
}

// InboxHandler serves the demo inbox: a page of the one-time codes the
// Company sent for Mediated Sign-In (Poppy 0.1 §4.7), newest first, each
// with the account, where it went (code.sent_to), and whether it is still
// waiting, as the User's phone or mailbox would show them. It is for demos,
// where no phone receives them; mount it wherever the person trying the
// demo looks. The codes are secrets (IssuedSecrets): serve it to that
// person only, never where the agent or its model reads.
func (s *Server) InboxHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "poppytest: the inbox is read with GET", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		_ = inboxTemplate.Execute(w, s.inbox())
	})
}

// inbox lists the codes sent, newest first, at most 20.
func (s *Server) inbox() []inboxEntry {
	now := s.timeNow()
	codes := s.SentCodes() // oldest first
	out := make([]inboxEntry, 0, min(len(codes), 20))
	for i := len(codes) - 1; i >= 0 && len(out) < 20; i-- {
		c := codes[i]
		e := inboxEntry{Sent: c.Expires.Add(-signInLife), SentTo: c.SentTo, Code: c.Code, Expires: c.Expires, State: "waiting"}
		switch {
		case !now.Before(c.Expires):
			e.State = "expired"
		case c.Finished:
			e.State = "finished"
		}
		a, _ := s.accountByID(c.Account) // accounts are fixed once the Server is built
		e.Email = a.Email
		out = append(out, e)
	}
	return out
}

var inboxTemplate = template.Must(template.New("inbox").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Demo inbox - Example Company</title>
<meta http-equiv="refresh" content="5"><meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem}td,th{padding:.3rem .6rem;text-align:left}.code{font:bold 1.4em monospace}</style>
</head><body><h1>Demo inbox</h1>
<p>A real Company sends one-time codes by text message or e-mail. The demo Company has no phone to text, so the codes
it sends for its test accounts appear here. Type a code on poppy-mcp's sign-in page, never to your assistant: a code
is a secret. This page refreshes by itself.</p>
{{if .}}<table id="codes"><tr><th>sent</th><th>account</th><th>sent to</th><th>code</th><th>state</th></tr>
{{range .}}<tr><td>{{.Sent.Format "15:04:05"}}</td><td>{{.Email}}</td><td>{{.SentTo}}</td><td class="code">{{.Code}}</td><td>{{.State}}{{if eq .State "waiting"}} until {{.Expires.Format "15:04:05"}}{{end}}</td></tr>
{{end}}</table>{{else}}<p id="empty">No code has been sent yet.</p>{{end}}
</body></html>
`))
