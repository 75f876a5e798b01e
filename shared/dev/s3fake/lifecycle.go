package s3fake

import (
	"time"
)

// ApplyLifecycle runs the NoncurrentVersionExpiration rule as of the fake's
// clock: every noncurrent version (delete markers included) noncurrent for
// at least the rule's days is removed for good. It returns how many went.
func (f *S3) ApplyLifecycle() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit := time.Duration(f.noncurrentDays) * 24 * time.Hour
	now := f.Now()
	n := 0
	for k, vs := range f.objects {
		kept := vs[:0]
		for i, v := range vs {
			if i < len(vs)-1 && !v.NoncurrentSince.IsZero() && !now.Before(v.NoncurrentSince.Add(limit)) {
				n++
				continue
			}
			kept = append(kept, v)
		}
		f.objects[k] = kept
	}
	return n
}

// ApplyRules runs the given lifecycle rules as of the fake's clock, as S3
// does on a versioned bucket: a noncurrent version is removed for good when
// a rule whose filter it matches has been due for it; an expired delete
// marker (no other version of its key left) is removed by a rule that says
// so. It returns how many versions and markers went.
func (f *S3) ApplyRules(rules []Rule) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, vs := range f.objects {
		kept := vs[:0]
		for i, v := range vs {
			if i < len(vs)-1 && !v.NoncurrentSince.IsZero() && f.expires(rules, v) {
				n++
				continue
			}
			kept = append(kept, v)
		}
		if len(kept) == 1 && kept[0].DeleteMarker {
			for _, r := range rules {
				if r.ExpiredObjectDeleteMarker {
					kept = kept[:0]
					n++
					break
				}
			}
		}
		f.objects[k] = kept
	}
	return n
}

func (f *S3) expires(rules []Rule, v *Version) bool {
	for _, r := range rules {
		if r.NoncurrentDays <= 0 || (r.TagKey != "" && (v.Tags == nil || v.Tags[r.TagKey] != r.TagValue)) {
			continue
		}
		if r.TagKey == "" || !v.DeleteMarker {
			if !f.Now().Before(v.NoncurrentSince.Add(time.Duration(r.NoncurrentDays) * 24 * time.Hour)) {
				return true
			}
		}
	}
	return false
}
