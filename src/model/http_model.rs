//! What an HTTP model client says in its wire format (where it posts, its own headers, the body,
//! how a whole answer reads), and the one [`Model`] every such client is: run on the workers, its
//! request posted and its answer read the same way, each of its errors sealed by its connection.

use futures::future::BoxFuture;
use serde::Serialize;

use super::answer::{read_answer, Assembler};
use super::http::{self, Connection};
use super::secrets::Secrets;
use super::{Model, ModelReply, ModelRequest, TextSink};
use crate::error::{Result, SdkError};

/// A model client over HTTP (Chat Completions, Anthropic Messages).
pub(crate) trait HttpModel: Send + Sync {
    /// Puts a streamed answer together.
    type Assembler: Assembler + Send;

    fn connection(&self) -> &Connection;

    /// Where a request is posted.
    fn url(&self) -> String;

    /// The client's own headers, sent before `advanced.connection.headers`.
    fn headers(&self) -> Vec<(&'static str, String)>;

    /// The JSON body of `request`.
    fn body<'a>(&'a self, request: &ModelRequest<'a>) -> impl Serialize + 'a;

    /// An answer sent whole (not streamed).
    fn parse(bytes: &[u8], secrets: &Secrets) -> Result<ModelReply>;
}

impl<M: HttpModel> Model for M {
    fn complete<'a>(&'a self, request: ModelRequest<'a>, on_text: TextSink<'a>) -> BoxFuture<'a, Result<ModelReply>> {
        Box::pin(async move {
            let connection = self.connection();
            let reply = async {
                let headers = http::header_map(&self.headers(), &connection.settings.headers)?;
                let body =
                    serde_json::to_vec(&self.body(&request)).map_err(|error| SdkError::model(error.to_string()))?;
                let opened = http::post(&self.url(), headers, body, connection).await?;
                read_answer::<M::Assembler>(opened, connection, on_text, M::parse).await
            };
            reply.await.map_err(|error| connection.seal(error))
        })
    }

    fn is_remote(&self) -> bool {
        true
    }
}

/// The error of an answer that is not `what` (`a chat completion`): why, and the start of the
/// answer with every secret masked.
pub(crate) fn malformed<'a>(
    what: &'a str,
    bytes: &'a [u8],
    secrets: &'a Secrets,
) -> impl Fn(String) -> SdkError + Copy + 'a {
    move |error| {
        SdkError::model(format!(
            "Model response is not {what}: {error} in {}",
            secrets.excerpt(&String::from_utf8_lossy(bytes), 200)
        ))
    }
}
