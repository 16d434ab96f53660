"""People and how they prove who they are: users, memberships, sessions, passwords, MFA (TOTP,
passkeys), single-use links, and sign-in through Google, GitHub, OpenID Connect and SAML."""
