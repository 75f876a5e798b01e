package template_test

import (
	"strings"
	"testing"
)

// The archive bucket's policy: the bucket's configuration, every delete
// (a delete marker included) and every put that is not a create are
// denied to every principal but the break-glass role (BreakGlassRoleArn;
// empty: nobody), whatever the principal's own policies allow; a put that
// is not a create is denied to the break-glass role too.
func TestArchiveBucketPolicyDeniesAllButBreakGlass(t *testing.T) {
	const role = "SweeperRole" // any role: its policy is widened to s3:* on the bucket
	bucket := "arn:aws:s3:::" + archiveName()
	open := func(breakGlass string) *stack {
		s := openStack(t, map[string]any{"BreakGlassRoleArn": breakGlass})
		st := stmt(t, s, role, "WriteTheArchive")
		st["Action"], st["Resource"] = "s3:*", []any{bucket, bucket + "/*"}
		stmt(t, s, role, "ArchivePutsAreCreatesOnly")["Effect"] = "Allow" // only the bucket's policy is left to deny
		return s
	}
	nobody := open("")
	roleARN := nobody.roleARN(role)
	breakGlass, other := open(roleARN), open("arn:aws:iam::"+env.Account+":role/ops/break-glass")
	req := func(action, resource string, ctx ...string) request {
		c := map[string]string{"aws:securetransport": "true", "aws:principalarn": roleARN, "aws:principalaccount": env.Account}
		for i := 0; i+1 < len(ctx); i += 2 {
			c[ctx[i]] = ctx[i+1]
		}
		return request{Action: action, Resource: resource, Context: c}
	}
	for _, c := range []struct {
		q   request
		sid string
		// glass: the break-glass role may do it
		glass bool
	}{
		{req("s3:PutLifecycleConfiguration", bucket), "OnlyBreakGlassReconfiguresTheBucket", true},
		{req("s3:PutReplicationConfiguration", bucket), "OnlyBreakGlassReconfiguresTheBucket", true},
		{req("s3:PutBucketObjectLockConfiguration", bucket), "OnlyBreakGlassReconfiguresTheBucket", true},
		{req("s3:PutBucketVersioning", bucket), "OnlyBreakGlassReconfiguresTheBucket", true},
		{req("s3:DeleteObject", bucket+"/archive/src/2026/12/01/ab/v000002.json"), "OnlyBreakGlassDeletes", true},
		{req("s3:DeleteObjectVersion", bucket+"/archive/src/2026/12/01/ab/v000002.json"), "OnlyBreakGlassDeletes", true},
		{req("s3:DeleteObject", bucket+"/ledger/segments/s/1.json"), "OnlyBreakGlassDeletes", true},
		{req("s3:DeleteObjectVersion", bucket+"/ledger/digests/000000000001.json"), "OnlyBreakGlassDeletes", true},
		{req("s3:PutObject", bucket+"/archive/src/2026/12/01/ab/v000002.json"), "PutsAreCreatesOnly", false},
		{req("s3:PutObject", bucket+"/archive/src/2026/12/01/ab/v000002.json", "s3:if-match", `"etag"`), "PutsAreCreatesOnly", false},
	} {
		if why := nobody.decide(role, c.q); why != "denied by ArchiveBucketPolicy/"+c.sid {
			t.Errorf("%s, no break-glass role: %q, want denied by %s", c.q, why, c.sid)
		}
		if why := other.decide(role, c.q); why != "denied by ArchiveBucketPolicy/"+c.sid {
			t.Errorf("%s, another break-glass role: %q, want denied by %s", c.q, why, c.sid)
		}
		why := breakGlass.decide(role, c.q)
		if c.glass && why != "" {
			t.Errorf("%s by the break-glass role: %q, want allowed", c.q, why)
		}
		if !c.glass && why != "denied by ArchiveBucketPolicy/"+c.sid {
			t.Errorf("%s by the break-glass role: %q, want denied by %s", c.q, why, c.sid)
		}
	}
	// A create is what the policy leaves alone (outside ledger/, which the
	// ledger role alone writes), and so are the bucket's reads.
	for _, q := range []request{
		req("s3:PutObject", bucket+"/archive/src/2026/12/01/ab/v000003.json", "s3:if-none-match", "*"),
		req("s3:GetObjectVersion", bucket+"/ledger/digests/000000000001.json"),
		req("s3:ListBucketVersions", bucket),
	} {
		if why := nobody.decide(role, q); why != "" {
			t.Errorf("%s: %q, want allowed", q, why)
		}
	}
	if why := breakGlass.decide(role, req("s3:PutObject", bucket+"/ledger/digests/000000000009.json", "s3:if-none-match", "*")); !strings.Contains(why, "OnlyTheLedgerWritesTheLedger") {
		t.Errorf("the break-glass role writes the ledger: %q", why)
	}
}

// The statements render to valid policies with and without a break-glass
// role: no empty condition value (ArnNotEquals with "" or an empty list
// is refused by S3), the condition left out when there is none.
func TestBreakGlassConditionRendersValid(t *testing.T) {
	for _, breakGlass := range []string{"", "arn:aws:iam::" + env.Account + ":role/break-glass"} {
		s := openStack(t, map[string]any{"BreakGlassRoleArn": breakGlass})
		doc := props(s.resources["ArchiveBucketPolicy"])["PolicyDocument"].(map[string]any)
		found := 0
		for _, st := range doc["Statement"].([]any) {
			m := st.(map[string]any)
			sid := str(m["Sid"])
			if sid != "OnlyBreakGlassReconfiguresTheBucket" && sid != "OnlyBreakGlassDeletes" {
				continue
			}
			found++
			cond, has := m["Condition"].(map[string]any)
			switch {
			case breakGlass == "" && has:
				t.Errorf("%s without a break-glass role has a condition %v", sid, cond)
			case breakGlass != "":
				v := strs(cond["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"])
				if len(v) != 1 || v[0] != breakGlass {
					t.Errorf("%s: condition %v, want ArnNotEquals %s", sid, cond, breakGlass)
				}
			}
		}
		if found != 2 {
			t.Fatalf("break-glass %q: %d statements", breakGlass, found)
		}
	}
}
