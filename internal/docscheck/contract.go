package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"bidgate/gateway/openapi"
	"bidgate/internal/apitest"
)

// nodeBasePort is where the cluster's nodes really listen (bidgate dev
// --base-port): the ports the documentation names (basePort and its admin
// ports) are contract-checking proxies in front of them, so that every
// answer an example provokes, bidbench's flash sale included, is checked
// against the OpenAPI documents.
const nodeBasePort = 18080

// contractCheck is the proxies, and the answers they saw that the
// documents do not describe.
type contractCheck struct {
	servers []*http.Server
	checked atomic.Int64

	mu         sync.Mutex
	violations []string
}

// countingChecker counts the exchanges it checks.
type countingChecker struct {
	apitest.Checker
	n *atomic.Int64
}

func (c countingChecker) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	c.n.Add(1)
	return c.Checker.Check(req, reqBody, resp, respBody)
}

// startContractCheck listens on the public and admin ports of nodes nodes
// of the dev layout at basePort and proxies each to the same port of the
// layout at nodeBasePort.
func startContractCheck(nodes int) (*contractCheck, error) {
	public, err := apitest.New(openapi.Public())
	if err != nil {
		return nil, err
	}
	admin, err := apitest.New(openapi.Admin())
	if err != nil {
		return nil, err
	}
	cc := &contractCheck{}
	for i := range nodes {
		for _, l := range []struct {
			offset   int
			contract *apitest.Contract
		}{{0, public}, {300, admin}} {
			if err := cc.listen(basePort+l.offset+i, nodeBasePort+l.offset+i, l.contract); err != nil {
				return nil, errors.Join(err, cc.stop(context.Background()))
			}
		}
	}
	return cc, nil
}

func (cc *contractCheck) listen(port, nodePort int, contract *apitest.Contract) error {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("port %d: %w (stop what listens there, a cluster of make run?, and run again)", port, err)
	}
	target := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(nodePort)}
	srv := &http.Server{
		Handler:           apitest.Proxy(target, countingChecker{contract, &cc.checked}, cc.report),
		ReadHeaderTimeout: 10 * time.Second,
	}
	cc.servers = append(cc.servers, srv)
	go func() { _ = srv.Serve(ln) }()
	return nil
}

func (cc *contractCheck) report(err error, body []byte) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.violations = append(cc.violations, fmt.Sprintf("%v\n    answer: %.500s", err, body))
}

// take returns the violations seen since the last call.
func (cc *contractCheck) take() []string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	v := cc.violations
	cc.violations = nil
	return v
}

func (cc *contractCheck) stop(ctx context.Context) error {
	var errs []error
	for _, s := range cc.servers {
		errs = append(errs, s.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
