package sigv4front

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Client posts JSON to an operator endpoint signed as one identity, as
// dlqctl does (the demo and the tests' second operator use it).
type Client struct {
	URL      string
	Identity Identity
	Region   string
	// HTTP is the client to send with (default http.DefaultClient).
	HTTP *http.Client
}

// Post signs body as c.Identity and posts it; it returns the status and
// the answer's body.
func (c Client) Post(ctx context.Context, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := Sign(ctx, req, body, c.Identity.Credentials(), c.Region, time.Now()); err != nil {
		return 0, nil, err
	}
	h := c.HTTP
	if h == nil {
		h = http.DefaultClient
	}
	resp, err := h.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("operator endpoint: %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, MaxPayload+1024))
	return resp.StatusCode, answer, err
}
