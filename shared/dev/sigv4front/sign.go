package sigv4front

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Sign signs req for a function URL in region the way dlqctl does: the
// SDK's SigV4 signer, service lambda, with X-Amz-Content-Sha256 set to the
// hash of body. req must carry body (http.NewRequestWithContext with
// bytes.NewReader(body) sets both), since the hash and Content-Length
// are signed.
func Sign(ctx context.Context, req *http.Request, body []byte, creds aws.Credentials, region string, now time.Time) error {
	if req.ContentLength != int64(len(body)) {
		return fmt.Errorf("sign %s %s: request has ContentLength %d for a body of %d bytes", req.Method, req.URL.Redacted(), req.ContentLength, len(body))
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hash, service, region, now); err != nil {
		return fmt.Errorf("sign %s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	return nil
}
