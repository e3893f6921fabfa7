package lakehouse.sql;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;

/**
 * HiveServer2's CUSTOM authentication for the lakehouse's SQL endpoint: one user and password,
 * read from the server's environment (LAKEHOUSE_SQL_USER, default "lakehouse", and
 * LAKEHOUSE_SQL_PASSWORD), so neither is on a command line or in a settings file. Both are
 * compared in constant time.
 */
public final class EnvironmentPasswordAuthenticator implements PasswdAuthenticationProvider {
  static final String USER_VARIABLE = "LAKEHOUSE_SQL_USER";
  static final String PASSWORD_VARIABLE = "LAKEHOUSE_SQL_PASSWORD";
  static final String DEFAULT_USER = "lakehouse";

  @Override
  public void Authenticate(String user, String password) throws AuthenticationException {
    String expectedPassword = System.getenv(PASSWORD_VARIABLE);
    if (expectedPassword == null || expectedPassword.isEmpty()) {
      throw new AuthenticationException(PASSWORD_VARIABLE + " is not set on the server");
    }
    String expectedUser = System.getenv(USER_VARIABLE);
    if (expectedUser == null || expectedUser.isEmpty()) {
      expectedUser = DEFAULT_USER;
    }
    boolean userMatches = MessageDigest.isEqual(bytes(user), bytes(expectedUser));
    boolean passwordMatches = MessageDigest.isEqual(bytes(password), bytes(expectedPassword));
    if (!(userMatches && passwordMatches)) {
      throw new AuthenticationException("Wrong user or password");
    }
  }

  private static byte[] bytes(String text) {
    return (text == null ? "" : text).getBytes(StandardCharsets.UTF_8);
  }
}
