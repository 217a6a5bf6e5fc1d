//! The Google providers' side of [`Auth`](super::Auth): which credentials file and IAM endpoint, the cached
//! tokens, one fetch at a time per server.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::google::{self, Adc};
use super::settings::Provider;
use super::token::Token;
use super::{AuthError, Target};
use crate::secrets::Secret;

/// Where Google credentials come from, and the tokens made from them.
#[derive(Debug, Default)]
pub(crate) struct GoogleSeat {
    /// The ADC file (`None`: no `HOME` to find it under).
    pub(super) adc_file: Option<PathBuf>,
    /// The IAM Credentials API's base URL.
    pub(super) iam_url: String,
    tokens: Mutex<HashMap<String, Token>>,
    flights: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl GoogleSeat {
    /// From the daemon's environment.
    pub(crate) fn from_env(env: impl Fn(&str) -> Option<String>) -> Self {
        Self {
            adc_file: google::adc_path(&env),
            iam_url: env("GEMINID_GOOGLE_IAM_URL").unwrap_or_else(|| google::IAM_URL.to_owned()),
            ..Self::default()
        }
    }

    fn adc(&self) -> Result<Adc, AuthError> {
        let path = self.adc_file.as_ref().ok_or_else(|| {
            AuthError::NeedsAuth(
                "no Google Application Default Credentials: set GOOGLE_APPLICATION_CREDENTIALS \
                 or run `gcloud auth application-default login`"
                    .into(),
            )
        })?;
        google::read_adc(path).map_err(|e| AuthError::NeedsAuth(e.to_string()))
    }

    /// The project for `X-Goog-User-Project`, when the credentials name one.
    pub(crate) fn quota_project(&self) -> Option<String> {
        self.adc().ok()?.quota_project().map(str::to_owned)
    }

    /// A Google provider's token for `t`, asked over `http`: cached until 5 minutes before it
    /// expires, else made (once, however many callers wait); after a 401 to `refused`, made
    /// again.
    pub(super) async fn bearer(
        &self,
        http: &reqwest::Client,
        t: &Target,
        refused: Option<&Secret<String>>,
    ) -> Result<Secret<String>, AuthError> {
        let seat = self;
        let cached = || seat.tokens.lock().get(&t.url).cloned();
        if let Some(c) = cached().filter(|c| google::fresh(c) && Some(&c.access) != refused) {
            return Ok(c.access);
        }
        let flight = seat.flights.lock().entry(t.url.clone()).or_default().clone();
        let _one = flight.lock().await;
        if let Some(c) = cached().filter(|c| google::fresh(c) && Some(&c.access) != refused) {
            return Ok(c.access);
        }
        let adc = seat.adc()?;
        let token = match &t.settings.provider {
            Provider::GoogleCredentials => {
                google::host_allowed(&t.url).map_err(|e| AuthError::NeedsAuth(e.to_string()))?;
                if t.settings.scopes.is_empty() {
                    return Err(AuthError::NeedsAuth(
                        "Scopes must be provided in the oauth config for Google Credentials \
                         provider"
                            .into(),
                    ));
                }
                google::access_token(http, &adc, &t.settings.scopes).await
            }
            Provider::Impersonation { audience, service_account } => {
                let audience = audience.as_deref().ok_or_else(|| {
                    AuthError::NeedsAuth(
                        "targetAudience must be provided for the Service Account Impersonation \
                         provider"
                            .into(),
                    )
                })?;
                let sa = service_account.as_deref().ok_or_else(|| {
                    AuthError::NeedsAuth(
                        "targetServiceAccount must be provided for the Service Account \
                         Impersonation provider"
                            .into(),
                    )
                })?;
                google::id_token(http, &seat.iam_url, &adc, audience, sa).await
            }
            Provider::Dynamic => return Err(AuthError::NeedsAuth("not a Google provider".into())),
        }
        .map_err(|e| AuthError::Unavailable(e.to_string()))?;
        seat.tokens.lock().insert(t.url.clone(), token.clone());
        Ok(token.access)
    }
}
