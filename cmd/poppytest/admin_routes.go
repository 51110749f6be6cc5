package main

// This file is the admin API's routes: runs, the agent's identity, what a
// person at the Company does (approve a device sign-in, read the one-time
// codes sent, join a conversation, disconnect the agent from an account),
// the options and faults of knobs.go and faults.go, and the violations.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// admin answers the admin API.
type admin struct {
	reg      *registry
	info     *serverInfo
	shutdown func() // asks serve to stop, as a signal does
	doc      []byte // the OpenAPI document
}

// newAdminMux registers every route of a.
func newAdminMux(a *admin) *adminMux {
	m := &adminMux{mux: http.NewServeMux()}
	m.handle("GET", "/admin/", a.index)
	m.handle("GET", "/admin/openapi.json", a.openAPI)
	m.handle("GET", "/admin/knobs", a.knobs)
	m.handle("GET", "/admin/violations", a.violations)
	m.handle("POST", "/admin/shutdown", a.shutdownNow)
	m.handle("GET", "/admin/runs", a.listRuns)
	m.handle("POST", "/admin/runs", a.createRun)
	m.handle("GET", "/admin/runs/{run}", a.withRun(a.getRun))
	m.handle("DELETE", "/admin/runs/{run}", a.withRun(a.deleteRun))
	m.handle("POST", "/admin/runs/{run}/reset", a.withRun(a.resetRun))
	m.handle("PUT", "/admin/runs/{run}/agent", a.withRun(a.putAgent))
	m.handle("GET", "/admin/runs/{run}/violations", a.withRun(a.runViolations))
	m.handle("GET", "/admin/runs/{run}/devices", a.withServer(a.devices))
	m.handle("POST", "/admin/runs/{run}/devices/{user_code}/approve", a.withServer(a.approveDevice))
	m.handle("POST", "/admin/runs/{run}/devices/{user_code}/deny", a.withServer(a.denyDevice))
	m.handle("GET", "/admin/runs/{run}/authorizations", a.withServer(a.authorizations))
	m.handle("POST", "/admin/runs/{run}/authorizations/{state}/approve", a.withServer(a.approveAuthorization))
	m.handle("POST", "/admin/runs/{run}/authorizations/{state}/deny", a.withServer(a.denyAuthorization))
	m.handle("GET", "/admin/runs/{run}/codes", a.withServer(a.codes))
	m.handle("GET", "/admin/runs/{run}/sessions", a.withServer(a.sessions))
	m.handle("POST", "/admin/runs/{run}/accounts/{account}/disconnect", a.withServer(a.disconnect))
	m.handle("GET", "/admin/runs/{run}/conversations", a.withServer(a.conversations))
	m.handle("GET", "/admin/runs/{run}/conversations/{id}", a.withServer(a.conversation))
	m.handle("POST", "/admin/runs/{run}/conversations/{id}/person", a.withServer(a.personJoin))
	m.handle("POST", "/admin/runs/{run}/conversations/{id}/person/messages", a.withServer(a.personSay))
	m.handle("POST", "/admin/runs/{run}/conversations/{id}/person/leave", a.withServer(a.personLeave))
	m.handle("GET", "/admin/runs/{run}/requests", a.withServer(a.requests))
	m.handle("GET", "/admin/runs/{run}/served", a.withServer(a.served))
	for _, f := range faults {
		m.handle("POST", "/admin/runs/{run}/faults/"+f.name, a.withServer(a.fault(f)))
	}
	return m
}

type handler = func(r *http.Request) (int, any, error)

// withRun finds the run of the path.
func (a *admin) withRun(h func(r *http.Request, run *run) (int, any, error)) handler {
	return func(r *http.Request) (int, any, error) {
		rn, err := a.reg.get(r.PathValue("run"))
		if err != nil {
			return 0, nil, err
		}
		return h(r, rn)
	}
}

// withServer finds the Company of the path's run.
func (a *admin) withServer(h func(r *http.Request, s *poppytest.Server) (int, any, error)) handler {
	return a.withRun(func(r *http.Request, rn *run) (int, any, error) { return h(r, a.reg.server(rn)) })
}

func (a *admin) index(*http.Request) (int, any, error) {
	return http.StatusOK, a.info.instructions(a.reg), nil
}

func (a *admin) openAPI(*http.Request) (int, any, error) {
	return http.StatusOK, json.RawMessage(a.doc), nil
}

func (a *admin) knobs(*http.Request) (int, any, error) { return http.StatusOK, knobList(), nil }

func (a *admin) violations(*http.Request) (int, any, error) {
	return http.StatusOK, map[string]any{"violations": nonNil(a.reg.allViolations())}, nil
}

func (a *admin) shutdownNow(*http.Request) (int, any, error) {
	a.shutdown()
	return http.StatusAccepted, map[string]string{"status": "stopping"}, nil
}

func (a *admin) listRuns(*http.Request) (int, any, error) {
	var out []runInfo
	for _, rn := range a.reg.list() {
		out = append(out, a.info.run(a.reg, rn))
	}
	return http.StatusOK, map[string]any{"runs": nonNil(out)}, nil
}

func (a *admin) createRun(r *http.Request) (int, any, error) {
	var spec runSpec
	if err := readBody(r, &spec, true); err != nil {
		return 0, nil, err
	}
	rn, err := a.reg.create(spec)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, a.info.run(a.reg, rn), nil
}

func (a *admin) getRun(_ *http.Request, rn *run) (int, any, error) {
	return http.StatusOK, a.info.run(a.reg, rn), nil
}

func (a *admin) deleteRun(_ *http.Request, rn *run) (int, any, error) {
	if rn.name == "default" {
		return 0, nil, conflict("the default run stays; reset it instead")
	}
	a.reg.remove(rn)
	return http.StatusNoContent, nil, nil
}

func (a *admin) resetRun(r *http.Request, rn *run) (int, any, error) {
	var body struct {
		Options map[string]json.RawMessage `json:"options"`
	}
	if err := readBody(r, &body, true); err != nil {
		return 0, nil, err
	}
	if err := a.reg.reset(rn, body.Options); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, a.info.run(a.reg, rn), nil
}

func (a *admin) putAgent(r *http.Request, rn *run) (int, any, error) {
	var docs agentDocs
	if err := readBody(r, &docs, false); err != nil {
		return 0, nil, err
	}
	if err := a.reg.registerAgent(rn, docs); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, a.info.run(a.reg, rn), nil
}

func (a *admin) runViolations(r *http.Request, rn *run) (int, any, error) {
	after, err := strconv.Atoi(orDefault(r.URL.Query().Get("after"), "0"))
	if err != nil || after < 0 {
		return 0, nil, badRequest("after: want the seq of the last violation already read")
	}
	vs := slices.DeleteFunc(a.reg.violations(rn), func(v poppytest.Violation) bool { return v.Seq <= after })
	return http.StatusOK, map[string]any{"violations": nonNil(vs)}, nil
}

func (a *admin) devices(_ *http.Request, s *poppytest.Server) (int, any, error) {
	return http.StatusOK, map[string]any{"devices": nonNil(s.DeviceRequests())}, nil
}

// approval is what the User approves: the account, and the scopes when
// fewer than asked.
type approval struct {
	Account string   `json:"account"`
	Scopes  []string `json:"scopes"`
}

// readApproval reads an approval's body; the account is required.
func readApproval(r *http.Request) (approval, error) {
	var body approval
	if err := readBody(r, &body, false); err != nil {
		return approval{}, err
	}
	if body.Account == "" {
		return approval{}, badRequest(`want {"account": "acct_dana"}, with "scopes" to grant fewer than asked`)
	}
	return body, nil
}

func (a *admin) approveDevice(r *http.Request, s *poppytest.Server) (int, any, error) {
	body, err := readApproval(r)
	if err != nil {
		return 0, nil, err
	}
	if err := s.ApproveDevice(r.PathValue("user_code"), body.Account, body.Scopes...); err != nil {
		return 0, nil, fromServer(err)
	}
	return http.StatusOK, map[string]string{"status": "approved"}, nil
}

func (a *admin) denyDevice(r *http.Request, s *poppytest.Server) (int, any, error) {
	if err := s.DenyDevice(r.PathValue("user_code")); err != nil {
		return 0, nil, fromServer(err)
	}
	return http.StatusOK, map[string]string{"status": "denied"}, nil
}

func (a *admin) authorizations(_ *http.Request, s *poppytest.Server) (int, any, error) {
	return http.StatusOK, map[string]any{"authorizations": s.AuthorizationRequests()}, nil
}

// approveAuthorization answers the consent page of a Direct Sign-In, as
// the User does, and returns where the Company sends the User's browser:
// the agent's redirect_uri with code, state and iss.
func (a *admin) approveAuthorization(r *http.Request, s *poppytest.Server) (int, any, error) {
	body, err := readApproval(r)
	if err != nil {
		return 0, nil, err
	}
	u, err := s.ApproveAuthorization(r.PathValue("state"), body.Account, body.Scopes...)
	if err != nil {
		return 0, nil, fromServer(err)
	}
	return http.StatusOK, map[string]string{"redirect_url": u}, nil
}

func (a *admin) denyAuthorization(r *http.Request, s *poppytest.Server) (int, any, error) {
	u, err := s.DenyAuthorization(r.PathValue("state"))
	if err != nil {
		return 0, nil, fromServer(err)
	}
	return http.StatusOK, map[string]string{"redirect_url": u}, nil
}

func (a *admin) codes(_ *http.Request, s *poppytest.Server) (int, any, error) {
	return http.StatusOK, map[string]any{"codes": nonNil(s.SentCodes())}, nil
}

func (a *admin) sessions(_ *http.Request, s *poppytest.Server) (int, any, error) {
	out := []sessionWire{}
	for _, sess := range s.Sessions() {
		out = append(out, sessionWire{sess.ID, sess.ClientID, sess.UserID, sess.Account, sess.SignedIn, nonNil(sess.Scopes), sess.Ended, sess.Created})
	}
	return http.StatusOK, map[string]any{"sessions": out}, nil
}

func (a *admin) disconnect(r *http.Request, s *poppytest.Server) (int, any, error) {
	n := s.RevokeAccountTokens(r.PathValue("account"))
	return http.StatusOK, map[string]int{"revoked": n}, nil
}

func (a *admin) requests(_ *http.Request, s *poppytest.Server) (int, any, error) {
	out := []requestWire{}
	for _, req := range s.Requests() {
		out = append(out, requestWire{req.Method, req.Host, req.Path, req.Time})
	}
	return http.StatusOK, map[string]any{"requests": out}, nil
}

func (a *admin) served(_ *http.Request, s *poppytest.Server) (int, any, error) {
	return http.StatusOK, map[string]any{"served": s.ServedCounts()}, nil
}

// fault applies f with the body's parameters.
func (a *admin) fault(f fault) func(r *http.Request, s *poppytest.Server) (int, any, error) {
	return func(r *http.Request, s *poppytest.Server) (int, any, error) {
		body := map[string]json.RawMessage{}
		if err := readBody(r, &body, true); err != nil {
			return 0, nil, err
		}
		args, err := parseFaultArgs(f, body)
		if err != nil {
			return 0, nil, badRequest(err.Error())
		}
		out, err := f.do(s, args)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, map[string]any{"fault": f.name, "result": out}, nil
	}
}

// nonNil makes a nil slice an empty one, so JSON has [] and not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
