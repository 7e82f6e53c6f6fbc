//! The one shape of a napi function that can fail: [`NativeResult`]. `unwrap` in `lib/wire.js`
//! is its one reader: it returns the value, or throws the error `toError` (`lib/errors.js`)
//! rebuilds from [`NativeError`].

use napi::bindgen_prelude::Either;
use napi_derive::napi;
use serde_json::Value;

use crate::error::SdkError;

/// The value, or the error the core refused with. No value type has an `error` key: that key
/// is how `unwrap` tells a [`NativeError`] apart.
#[napi]
pub type NativeResult<T> = Either<T, NativeError>;

/// An `SdkError` that crossed: `error` is its JSON (`{ code?, message, ... }`, see its
/// `Serialize`), made into an object here so JS has nothing to parse.
#[napi(object, object_from_js = false)]
pub struct NativeError {
    pub error: Value,
}

impl From<&SdkError> for NativeError {
    fn from(error: &SdkError) -> Self {
        // A map of strings and numbers: serializing it cannot fail.
        let error = serde_json::to_value(error).unwrap_or_else(|_| serde_json::json!({ "message": error.message }));
        NativeError { error }
    }
}

/// `outcome` as it crosses.
pub fn native<T>(outcome: Result<T, SdkError>) -> NativeResult<T> {
    match outcome {
        Ok(value) => Either::A(value),
        Err(error) => Either::B(NativeError::from(&error)),
    }
}
