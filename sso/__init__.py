"""Sign-in with the company's identity provider (OpenID Connect): who a person is at the
provider, the gateway user and groups that follows from it, and passwords turned off
(ARCHITECTURE.md, docs/sso.md)."""
