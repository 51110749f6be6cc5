// Package agent holds what poppy-mcp keeps in memory for each person it
// serves: a Person is one local user (mcpauth.KeyFrom of a request; "" for
// the one person of stdio and loopback HTTP), and owns, per Company
// (identified by its auth.issuer, Poppy 0.1 §3.2), the documents of each of
// the Company's domains used so far, the Session (auth.Sessions), the
// sign-in in progress, the conversation Trackers, the tools announced from
// the Company's APIs and the connections to its MCP servers. Everything of
// lasting value is in the store (User IDs, Sessions, Account Tokens, kept
// sign-ins, conversations); what a Person holds in memory can be dropped
// and loaded back, which is what lets a hosted poppy-mcp forget a person
// who has been idle (Person.Close).
//
// Package agent knows nothing of MCP: the MCP layer (package tools) keeps
// a registry of Persons, starts each tool call from the request's Person,
// and stores its own per-person pieces (sign-ins, relays) through the
// small interfaces SignIn and Relay.
//
// # Lock discipline
//
// A Person has one lock, Person.mu, for its table of Companies, its
// activity counts and the tools it has announced; each Company has one,
// Company.mu, for that Company's documents, hooks, sign-in, Trackers and
// relays. Neither is held during I/O, nor while calling out of the
// package (SignIn.Stop, Relay.Close run after the lock is released), and
// Person.mu is never taken while holding a Company.mu. The Session of a
// Company is auth.Sessions', under auth's own lock, held while a Session
// starts so that concurrent calls share one Session.
//
// Background work of a Person (device sign-in polling, retries of a relay)
// runs through Person.Go and ends at Person.Close, which waits for it.
package agent
